// The Store contract, checked identically against every backend (memory and Postgres).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/route.hpp"

#include "conformance/store_harness.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using core::RecordState;
using store::StoreError;

template <typename Harness>
class StoreConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(harness_.set_up());
    scope_ = fresh_scope("conformance");
  }
  void TearDown() override { harness_.tear_down(); }

  store::ClaimRequest claim_request(const std::string& key, const std::string& owner,
                                    const std::string& fingerprint = "v1:fingerprint-a") const {
    return store::ClaimRequest{.scope = scope_,
                               .key = key,
                               .fingerprint = fingerprint,
                               .owner = owner,
                               .ttl = 60s,
                               .lease = 10s,
                               .take_over_lapsed_lease = false};
  }
  store::CompleteRequest complete_request(const std::string& key, const std::string& owner,
                                          core::StoredResponse response,
                                          RecordState state = RecordState::completed) const {
    return store::CompleteRequest{
        .scope = scope_, .key = key, .owner = owner, .state = state, .response = std::move(response), .ttl = 60s};
  }
  // `ttl`: the one the key was claimed with (mark_unknown keeps the record ttl + retention from then).
  store::ReleaseRequest release_request(const std::string& key, const std::string& owner,
                                        std::chrono::milliseconds ttl = 60s) const {
    return store::ReleaseRequest{.scope = scope_, .key = key, .owner = owner, .ttl = ttl};
  }
  store::RecordKey record_key(const std::string& key) const { return store::RecordKey{.scope = scope_, .key = key}; }

  Harness harness_;
  std::string scope_;
};

// Each backend on its own and under the at-rest encryption decorator; Postgres both with named
// prepared statements and with unnamed statements.
using Backends =
    ::testing::Types<MemoryHarness, PgHarness, PgUnnamedHarness, Encrypted<MemoryHarness>, Encrypted<PgHarness>>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, MemoryHarness>) return "Memory";
    if constexpr (std::is_same_v<T, PgHarness>) return "Postgres";
    if constexpr (std::is_same_v<T, PgUnnamedHarness>) return "PostgresUnnamed";
    if constexpr (std::is_same_v<T, Encrypted<MemoryHarness>>) return "EncryptedMemory";
    return "EncryptedPostgres";
  }
};
TYPED_TEST_SUITE(StoreConformance, Backends, BackendNames);

TEST(StoreErrorName, EveryErrorHasItsOwnName) {
  const std::vector<std::pair<StoreError, std::string_view>> names = {{StoreError::ok, "ok"},
                                                                      {StoreError::unavailable, "unavailable"},
                                                                      {StoreError::busy, "busy"},
                                                                      {StoreError::reply_lost, "reply_lost"},
                                                                      {StoreError::not_owner, "not_owner"},
                                                                      {StoreError::not_found, "not_found"},
                                                                      {StoreError::internal, "internal"},
                                                                      {StoreError::corrupt, "corrupt"}};
  for (const auto& [error, name] : names) EXPECT_EQ(store::store_error_name(error), name);
}

core::StoredResponse binary_response() {
  core::StoredResponse response;
  response.status = 201;
  response.headers = {{"Content-Type", "application/octet-stream"}, {"X-Order-Id", "ord_42"}, {"X-Empty", ""}};
  response.body = std::string("head\0mid\xff\xfe tail\r\n", 17);
  response.body += std::string(1, '\0');
  return response;
}

TYPED_TEST(StoreConformance, ClaimOfANewKeyClaims) {
  const ClaimOutcome first = this->harness_.claim(this->claim_request("k1", "owner-1"));
  ASSERT_EQ(first.error, StoreError::ok);
  EXPECT_TRUE(first.result.claimed);
}

TYPED_TEST(StoreConformance, SecondClaimSeesTheInFlightRecordAndItsLease) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  const ClaimOutcome second = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(second.error, StoreError::ok);
  EXPECT_FALSE(second.result.claimed);
  EXPECT_EQ(second.result.existing.state, RecordState::in_flight);
  EXPECT_EQ(second.result.existing.fingerprint, "v1:fingerprint-a");
  EXPECT_GT(second.result.existing.lease_remaining, 0ms);
  EXPECT_LE(second.result.existing.lease_remaining, 10'000ms);
}

TYPED_TEST(StoreConformance, CompletedRecordComesBackByteExact) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  const core::StoredResponse response = binary_response();
  ASSERT_EQ(response.body.size(), 18u);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", response)), StoreError::ok);

  const ClaimOutcome replay = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(replay.error, StoreError::ok);
  ASSERT_FALSE(replay.result.claimed);
  const core::Record& record = replay.result.existing;
  EXPECT_EQ(record.state, RecordState::completed);
  EXPECT_EQ(record.fingerprint, "v1:fingerprint-a");
  EXPECT_EQ(record.response.status, 201);
  EXPECT_EQ(record.response.headers, response.headers);
  EXPECT_EQ(record.response.body, response.body);
}

TYPED_TEST(StoreConformance, EmptyBodyAndNoHeadersStayEmpty) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  core::StoredResponse response;
  response.status = 204;
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", response)), StoreError::ok);

  const ClaimOutcome replay = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(replay.error, StoreError::ok);
  ASSERT_FALSE(replay.result.claimed);
  EXPECT_EQ(replay.result.existing.state, RecordState::completed);
  EXPECT_EQ(replay.result.existing.response.status, 204);
  EXPECT_TRUE(replay.result.existing.response.headers.empty());
  EXPECT_TRUE(replay.result.existing.response.body.empty());
}

TYPED_TEST(StoreConformance, MebibyteBodyComesBackByteExact) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  core::StoredResponse response;
  response.status = 200;
  response.headers = {{"Content-Type", "application/octet-stream"}};
  response.body.resize((1u << 20) + 7);
  std::uint32_t state = 0x9e3779b9u;  // xorshift: every byte value, no pattern a codec could hide
  for (char& byte : response.body) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    byte = static_cast<char>(state & 0xFFu);
  }
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", response)), StoreError::ok);
  const ClaimOutcome replay = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(replay.error, StoreError::ok);
  ASSERT_FALSE(replay.result.claimed);
  EXPECT_EQ(replay.result.existing.response.body.size(), response.body.size());
  EXPECT_TRUE(replay.result.existing.response.body == response.body);  // no 1 MiB diff on failure
}

TYPED_TEST(StoreConformance, DifferentFingerprintGetsTheExistingRecord) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1", "v1:first")).result.claimed);
  const ClaimOutcome other = this->harness_.claim(this->claim_request("k1", "owner-2", "v1:second"));
  ASSERT_EQ(other.error, StoreError::ok);
  EXPECT_FALSE(other.result.claimed);
  EXPECT_EQ(other.result.existing.fingerprint, "v1:first");  // the decision layer sees the mismatch
  EXPECT_EQ(other.result.existing.state, RecordState::in_flight);
}

TYPED_TEST(StoreConformance, TooLargeCompletionKeepsTheStatusOnly) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response(), RecordState::too_large)),
            StoreError::ok);
  const ClaimOutcome later = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(later.error, StoreError::ok);
  ASSERT_FALSE(later.result.claimed);
  EXPECT_EQ(later.result.existing.state, RecordState::too_large);
  EXPECT_EQ(later.result.existing.response.status, 201);
  EXPECT_TRUE(later.result.existing.response.headers.empty());
  EXPECT_TRUE(later.result.existing.response.body.empty());
}

TYPED_TEST(StoreConformance, ReleaseLetsTheNextClaimClaim) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.release(this->release_request("k1", "owner-1")), StoreError::ok);
  const ClaimOutcome next = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(next.error, StoreError::ok);
  EXPECT_TRUE(next.result.claimed);
  // The old owner's token is worth nothing now.
  EXPECT_EQ(this->harness_.release(this->release_request("k1", "owner-1")), StoreError::not_owner);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-2", binary_response())), StoreError::ok);
}

// A release that finds nothing to delete fences its owner: the claim that owner gave up on (its
// reply was lost) may still arrive, and must take nothing. Any other owner still claims the key.
TYPED_TEST(StoreConformance, AClaimByAnOwnerWhoseReleaseFoundNothingTakesNothing) {
  EXPECT_EQ(this->harness_.release(this->release_request("k1", "given-up")), StoreError::not_owner);
  const ClaimOutcome late = this->harness_.claim(this->claim_request("k1", "given-up"));
  EXPECT_NE(late.error, StoreError::ok) << "there is no record to answer with";
  EXPECT_FALSE(late.result.claimed);
  EXPECT_EQ(this->harness_.inspect(this->record_key("k1")).error, StoreError::not_found);

  const ClaimOutcome next = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(next.error, StoreError::ok);
  EXPECT_TRUE(next.result.claimed);
  // Once a live record exists, the fenced owner's claim is answered with it, and still takes nothing.
  const ClaimOutcome again = this->harness_.claim(this->claim_request("k1", "given-up"));
  ASSERT_EQ(again.error, StoreError::ok);
  EXPECT_FALSE(again.result.claimed);
  EXPECT_EQ(again.result.existing.state, RecordState::in_flight);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-2", binary_response())), StoreError::ok);
}

TYPED_TEST(StoreConformance, WrongOwnerCanNeitherCompleteNorRelease) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "intruder", binary_response())),
            StoreError::not_owner);
  EXPECT_EQ(this->harness_.release(this->release_request("k1", "intruder")), StoreError::not_owner);
  // Nothing changed: still in flight, and the real owner still holds it.
  const ClaimOutcome probe = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(probe.error, StoreError::ok);
  EXPECT_FALSE(probe.result.claimed);
  EXPECT_EQ(probe.result.existing.state, RecordState::in_flight);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
}

// A completion whose reply was lost is run again by its owner: it finds its own result and is a
// success, which changes nothing (same bytes, same completion time). Nothing else is allowed.
TYPED_TEST(StoreConformance, CompletingAgainByItsOwnerIsASuccessThatChangesNothing) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  const auto first = this->harness_.inspect(this->record_key("k1"));
  ASSERT_EQ(first.error, StoreError::ok);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  const auto again = this->harness_.inspect(this->record_key("k1"));
  ASSERT_EQ(again.error, StoreError::ok);
  EXPECT_EQ(again.info.state, RecordState::completed);
  EXPECT_EQ(again.info.completed_at_ms, first.info.completed_at_ms);
  // Another final state, another owner, or a release: the record is not theirs to change.
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response(), RecordState::too_large)),
            StoreError::not_owner);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "intruder", binary_response())),
            StoreError::not_owner);
  EXPECT_EQ(this->harness_.release(this->release_request("k1", "owner-1")), StoreError::not_owner);
  const ClaimOutcome replay = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(replay.error, StoreError::ok);
  ASSERT_FALSE(replay.result.claimed);
  EXPECT_EQ(replay.result.existing.state, RecordState::completed);
  EXPECT_EQ(replay.result.existing.response.body, binary_response().body);
}

TYPED_TEST(StoreConformance, UnknownKeyIsNotOwned) {
  EXPECT_EQ(this->harness_.complete(this->complete_request("missing", "owner-1", binary_response())),
            StoreError::not_owner);
  EXPECT_EQ(this->harness_.release(this->release_request("missing", "owner-1")), StoreError::not_owner);
}

TYPED_TEST(StoreConformance, ExpiredRecordCountsAsAbsent) {
  store::ClaimRequest request = this->claim_request("k1", "owner-1");
  request.ttl = 300ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);

  request.owner = "owner-2";
  const ClaimOutcome before = this->harness_.claim(request);
  ASSERT_EQ(before.error, StoreError::ok);
  EXPECT_FALSE(before.result.claimed);
  EXPECT_EQ(before.result.existing.state, RecordState::completed);

  this->harness_.let_time_pass(450ms);
  request.owner = "owner-3";
  request.fingerprint = "v1:another-request";  // absent means absent: any request may claim
  const ClaimOutcome after = this->harness_.claim(request);
  ASSERT_EQ(after.error, StoreError::ok);
  EXPECT_TRUE(after.result.claimed);

  // The replaced record starts clean: in flight, no leftover response, the new fingerprint.
  const ClaimOutcome probe = this->harness_.claim(this->claim_request("k1", "owner-4"));
  ASSERT_EQ(probe.error, StoreError::ok);
  ASSERT_FALSE(probe.result.claimed);
  EXPECT_EQ(probe.result.existing.state, RecordState::in_flight);
  EXPECT_EQ(probe.result.existing.fingerprint, "v1:another-request");
  EXPECT_EQ(probe.result.existing.response.status, 0);
  EXPECT_TRUE(probe.result.existing.response.body.empty());
  EXPECT_TRUE(probe.result.existing.response.headers.empty());
}

TYPED_TEST(StoreConformance, LapsedLeaseIsTakenOverOnlyWhenAsked) {
  store::ClaimRequest request = this->claim_request("k1", "owner-1");
  request.lease = 200ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  this->harness_.let_time_pass(350ms);

  request.owner = "owner-2";
  request.take_over_lapsed_lease = false;
  const ClaimOutcome without = this->harness_.claim(request);
  ASSERT_EQ(without.error, StoreError::ok);
  EXPECT_FALSE(without.result.claimed);
  EXPECT_EQ(without.result.existing.state, RecordState::in_flight);
  EXPECT_LE(without.result.existing.lease_remaining, 0ms);

  request.owner = "owner-3";
  request.take_over_lapsed_lease = true;
  const ClaimOutcome with = this->harness_.claim(request);
  ASSERT_EQ(with.error, StoreError::ok);
  EXPECT_TRUE(with.result.claimed);

  // The first owner lost the record; the one that took it over holds it.
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::not_owner);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-3", binary_response())), StoreError::ok);
}

TYPED_TEST(StoreConformance, LapsedLeaseIsNotTakenOverByADifferentRequest) {
  store::ClaimRequest request = this->claim_request("k1", "owner-1", "v1:first");
  request.lease = 200ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  this->harness_.let_time_pass(350ms);

  request.owner = "owner-2";
  request.fingerprint = "v1:second";
  request.take_over_lapsed_lease = true;
  const ClaimOutcome other = this->harness_.claim(request);
  ASSERT_EQ(other.error, StoreError::ok);
  EXPECT_FALSE(other.result.claimed);
  EXPECT_EQ(other.result.existing.fingerprint, "v1:first");
}

// A record made before fingerprint v2 carries the request's v1 fingerprint: a claim that offers
// it as legacy_fingerprint takes the lapsed lease over and claims the record anew with its v2 one.
TYPED_TEST(StoreConformance, LapsedLeaseIsTakenOverByTheSameRequestsLegacyFingerprint) {
  store::ClaimRequest old = this->claim_request("k1", "owner-1", "v1:same-request");
  old.lease = 200ms;
  ASSERT_TRUE(this->harness_.claim(old).result.claimed);
  this->harness_.let_time_pass(350ms);

  store::ClaimRequest request = this->claim_request("k1", "owner-2", "v2:same-request");
  request.take_over_lapsed_lease = true;
  request.legacy_fingerprint = "v1:another-request";
  const ClaimOutcome other = this->harness_.claim(request);
  ASSERT_EQ(other.error, StoreError::ok);
  EXPECT_FALSE(other.result.claimed);
  EXPECT_EQ(other.result.existing.fingerprint, "v1:same-request");

  request.owner = "owner-3";
  request.legacy_fingerprint = "v1:same-request";
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-3", binary_response())), StoreError::ok);
  const ClaimOutcome replay = this->harness_.claim(this->claim_request("k1", "owner-4", "v2:same-request"));
  EXPECT_FALSE(replay.result.claimed);
  EXPECT_EQ(replay.result.existing.fingerprint, "v2:same-request");
  EXPECT_EQ(replay.result.existing.state, RecordState::completed);
}

TYPED_TEST(StoreConformance, TakeOverNeverTouchesAFinishedRecord) {
  store::ClaimRequest request = this->claim_request("k1", "owner-1");
  request.lease = 200ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  this->harness_.let_time_pass(350ms);

  request.owner = "owner-2";
  request.take_over_lapsed_lease = true;
  const ClaimOutcome later = this->harness_.claim(request);
  ASSERT_EQ(later.error, StoreError::ok);
  EXPECT_FALSE(later.result.claimed);
  EXPECT_EQ(later.result.existing.state, RecordState::completed);
  EXPECT_EQ(later.result.existing.response.body, binary_response().body);
}

TYPED_TEST(StoreConformance, SameKeyInTwoScopesIsTwoRecords) {
  store::ClaimRequest in_a = this->claim_request("shared-key", "owner-a", "v1:a");
  store::ClaimRequest in_b = this->claim_request("shared-key", "owner-b", "v1:b");
  in_b.scope = fresh_scope("conformance-other");
  ASSERT_TRUE(this->harness_.claim(in_a).result.claimed);
  const ClaimOutcome b = this->harness_.claim(in_b);
  ASSERT_EQ(b.error, StoreError::ok);
  EXPECT_TRUE(b.result.claimed);

  ASSERT_EQ(this->harness_.complete(this->complete_request("shared-key", "owner-a", binary_response())),
            StoreError::ok);
  in_b.owner = "owner-b2";
  const ClaimOutcome b_again = this->harness_.claim(in_b);
  ASSERT_EQ(b_again.error, StoreError::ok);
  ASSERT_FALSE(b_again.result.claimed);
  EXPECT_EQ(b_again.result.existing.state, RecordState::in_flight);  // A's completion did not leak into B
  EXPECT_EQ(b_again.result.existing.fingerprint, "v1:b");
}

// --- unknown records: mark_unknown -------------------------------------------------------------

TYPED_TEST(StoreConformance, MarkUnknownByTheOwnerMakesTheRecordUnknown) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.mark_unknown(this->release_request("k1", "owner-1")), StoreError::ok);

  const ClaimOutcome later = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(later.error, StoreError::ok);
  ASSERT_FALSE(later.result.claimed);
  EXPECT_EQ(later.result.existing.state, RecordState::unknown);
  EXPECT_EQ(later.result.existing.fingerprint, "v1:fingerprint-a");
  EXPECT_EQ(later.result.existing.response.status, 0);
  const core::RoutePolicy lock_policy;  // unknown_outcome=lock
  EXPECT_EQ(core::decide(later.result, "v1:fingerprint-a", lock_policy).action, core::Action::outcome_unknown);

  // Terminal for its owner too: nothing more to complete or release. Marking it again (the first
  // mark's reply was lost) is a success that changes nothing.
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::not_owner);
  EXPECT_EQ(this->harness_.release(this->release_request("k1", "owner-1")), StoreError::not_owner);
  EXPECT_EQ(this->harness_.mark_unknown(this->release_request("k1", "owner-1")), StoreError::ok);
  EXPECT_EQ(this->harness_.mark_unknown(this->release_request("k1", "intruder")), StoreError::not_owner);
  const ClaimOutcome still = this->harness_.claim(this->claim_request("k1", "owner-3"));
  ASSERT_EQ(still.error, StoreError::ok);
  ASSERT_FALSE(still.result.claimed);
  EXPECT_EQ(still.result.existing.state, RecordState::unknown);
}

// Webhook senders retry for days: a record marked unknown outlives its ttl by the retention it
// was marked with, and keeps answering (unknown, never claimed anew) until then. Marking it again
// moves nothing.
TYPED_TEST(StoreConformance, AnUnknownRecordOutlivesItsTtlByItsRetention) {
  store::ClaimRequest short_ttl = this->claim_request("k1", "owner-1");
  short_ttl.ttl = 300ms;
  short_ttl.lease = 100ms;
  ASSERT_TRUE(this->harness_.claim(short_ttl).result.claimed);
  store::ReleaseRequest mark = this->release_request("k1", "owner-1");
  mark.ttl = short_ttl.ttl;
  mark.unknown_retention = 1h;
  ASSERT_EQ(this->harness_.mark_unknown(mark), StoreError::ok);
  const auto marked = this->harness_.inspect(this->record_key("k1"));
  ASSERT_EQ(marked.error, StoreError::ok);
  ASSERT_EQ(this->harness_.mark_unknown(mark), StoreError::ok);
  const auto again = this->harness_.inspect(this->record_key("k1"));
  ASSERT_EQ(again.error, StoreError::ok);
  EXPECT_EQ(again.info.expires_at_ms, marked.info.expires_at_ms) << "a second mark moved the expiry again";
  EXPECT_GE(marked.info.expires_at_ms - marked.info.created_at_ms, 3'600'000);

  this->harness_.let_time_pass(400ms);  // past the ttl, within the retention
  const ClaimOutcome later = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(later.error, StoreError::ok);
  EXPECT_FALSE(later.result.claimed) << "an unknown record was replaced at its ttl";
  EXPECT_EQ(later.result.existing.state, RecordState::unknown);
  EXPECT_EQ(this->harness_.force_release(this->record_key("k1")), StoreError::ok)
      << "the operator can still release it";
}

// unknown_outcome: lock. A proxy that dies mid-exchange leaves an in-flight record nobody will
// settle; its request may have run. It must last as long as an unknown record would, not end at
// its ttl (after which a retry would execute again). A completion brings the expiry back to the
// ttl, counted from the claim.
TYPED_TEST(StoreConformance, AnUnsettledInFlightRecordOutlivesItsTtlUntilCompleted) {
  store::ClaimRequest locked = this->claim_request("k1", "owner-1");
  locked.ttl = 300ms;
  locked.lease = 100ms;
  locked.unsettled_retention = 1h;
  ASSERT_TRUE(this->harness_.claim(locked).result.claimed);
  store::ClaimRequest settled = locked;
  settled.key = "k2";
  settled.owner = "owner-2";
  ASSERT_TRUE(this->harness_.claim(settled).result.claimed);
  store::CompleteRequest completion = this->complete_request("k2", "owner-2", binary_response());
  completion.ttl = settled.ttl;
  ASSERT_EQ(this->harness_.complete(completion), StoreError::ok);

  this->harness_.let_time_pass(400ms);  // past the ttl and the lease
  const ClaimOutcome crashed = this->harness_.claim(this->claim_request("k1", "owner-3"));
  ASSERT_EQ(crashed.error, StoreError::ok);
  EXPECT_FALSE(crashed.result.claimed) << "an unsettled in-flight record was replaced at its ttl";
  EXPECT_EQ(crashed.result.existing.state, RecordState::in_flight);
  EXPECT_LE(crashed.result.existing.lease_remaining.count(), 0);
  const ClaimOutcome completed = this->harness_.claim(this->claim_request("k2", "owner-4"));
  ASSERT_EQ(completed.error, StoreError::ok);
  EXPECT_TRUE(completed.result.claimed) << "a completed record outlived its ttl";
  EXPECT_EQ(this->harness_.force_release(this->record_key("k1")), StoreError::ok) << "the operator can release it";
}

// A route whose scope changed form (the host joined it) claims under the new scope and probes the
// legacy one: a live record there is the answer, and nothing is claimed; an expired one, or none,
// leaves the claim as usual. The probe never takes a legacy record over or writes under it.
TYPED_TEST(StoreConformance, ALiveRecordUnderTheLegacyScopeIsTheAnswerAndNothingIsClaimed) {
  const std::string legacy_scope = this->scope_;
  this->scope_ = fresh_scope("conformance-v2");
  store::ClaimRequest old_claim = this->claim_request("k1", "owner-1");
  old_claim.scope = legacy_scope;
  old_claim.ttl = 300ms;
  ASSERT_TRUE(this->harness_.claim(old_claim).result.claimed);
  store::CompleteRequest old_completion = this->complete_request("k1", "owner-1", binary_response());
  old_completion.scope = legacy_scope;
  old_completion.ttl = old_claim.ttl;
  ASSERT_EQ(this->harness_.complete(old_completion), StoreError::ok);

  store::ClaimRequest retry = this->claim_request("k1", "owner-2");
  retry.legacy_scope = legacy_scope;
  const ClaimOutcome replayed = this->harness_.claim(retry);
  ASSERT_EQ(replayed.error, StoreError::ok);
  EXPECT_FALSE(replayed.result.claimed) << "the retry of a record made under the legacy scope executed again";
  EXPECT_TRUE(replayed.result.existing_under_legacy_scope);
  EXPECT_EQ(replayed.result.existing.state, RecordState::completed);
  EXPECT_EQ(replayed.result.existing.response.body, binary_response().body);
  EXPECT_EQ(replayed.result.existing.response.headers, binary_response().headers);
  EXPECT_FALSE(this->harness_.holds(this->record_key("k1"))) << "the probe wrote under the new scope";

  // Another key: no legacy record, so the claim is an ordinary one under the new scope.
  store::ClaimRequest fresh = this->claim_request("k2", "owner-3");
  fresh.legacy_scope = legacy_scope;
  const ClaimOutcome claimed = this->harness_.claim(fresh);
  ASSERT_EQ(claimed.error, StoreError::ok);
  EXPECT_TRUE(claimed.result.claimed);
  const ClaimOutcome duplicate = this->harness_.claim(fresh);
  EXPECT_FALSE(duplicate.result.claimed);
  EXPECT_FALSE(duplicate.result.existing_under_legacy_scope);
  EXPECT_EQ(duplicate.result.existing.state, RecordState::in_flight);

  // Once the legacy record expired, the key is claimed under the new scope.
  this->harness_.let_time_pass(400ms);
  store::ClaimRequest after_expiry = this->claim_request("k1", "owner-4");
  after_expiry.legacy_scope = legacy_scope;
  EXPECT_TRUE(this->harness_.claim(after_expiry).result.claimed);
}

// A claim replaces an expired record, but never one in flight whose lease still runs (a ttl
// shorter than the lease, from a config that changed under it): its request may be executing.
TYPED_TEST(StoreConformance, AnInFlightRecordWithinItsLeaseIsNeverReplacedEvenPastItsTtl) {
  store::ClaimRequest odd = this->claim_request("k1", "owner-1");
  odd.ttl = 100ms;
  odd.lease = 10s;
  ASSERT_TRUE(this->harness_.claim(odd).result.claimed);
  this->harness_.let_time_pass(200ms);
  const ClaimOutcome later = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(later.error, StoreError::ok);
  EXPECT_FALSE(later.result.claimed) << "a running request's record was replaced at its ttl";
  EXPECT_EQ(later.result.existing.state, RecordState::in_flight);
  EXPECT_GT(later.result.existing.lease_remaining, 5s);
}

TYPED_TEST(StoreConformance, MarkUnknownByAnotherOwnerChangesNothing) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  EXPECT_EQ(this->harness_.mark_unknown(this->release_request("k1", "intruder")), StoreError::not_owner);
  EXPECT_EQ(this->harness_.mark_unknown(this->release_request("missing", "owner-1")), StoreError::not_owner);

  const ClaimOutcome probe = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(probe.error, StoreError::ok);
  ASSERT_FALSE(probe.result.claimed);
  EXPECT_EQ(probe.result.existing.state, RecordState::in_flight);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
}

TYPED_TEST(StoreConformance, MarkUnknownOfAFinishedRecordIsNotOwned) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  EXPECT_EQ(this->harness_.mark_unknown(this->release_request("k1", "owner-1")), StoreError::not_owner);
  const ClaimOutcome replay = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(replay.error, StoreError::ok);
  ASSERT_FALSE(replay.result.claimed);
  EXPECT_EQ(replay.result.existing.state, RecordState::completed);
}

TYPED_TEST(StoreConformance, UnknownRecordIsNeverTakenOverEvenWhenAsked) {
  store::ClaimRequest request = this->claim_request("k1", "owner-1");
  request.lease = 200ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  ASSERT_EQ(this->harness_.mark_unknown(this->release_request("k1", "owner-1")), StoreError::ok);
  this->harness_.let_time_pass(350ms);  // the original lease has lapsed long ago

  request.owner = "owner-2";
  request.take_over_lapsed_lease = true;  // what unknown_outcome=retry sends
  const ClaimOutcome retry = this->harness_.claim(request);
  ASSERT_EQ(retry.error, StoreError::ok);
  ASSERT_FALSE(retry.result.claimed);
  EXPECT_EQ(retry.result.existing.state, RecordState::unknown);
  core::RoutePolicy retry_policy;
  retry_policy.unknown_outcome = core::UnknownOutcome::retry;
  EXPECT_EQ(core::decide(retry.result, request.fingerprint, retry_policy).action, core::Action::outcome_unknown);
}

// --- force_release ------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, ForceReleaseOfAnUnknownRecordLetsTheNextClaimClaim) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.mark_unknown(this->release_request("k1", "owner-1")), StoreError::ok);
  ASSERT_EQ(this->harness_.force_release(this->record_key("k1")), StoreError::ok);
  EXPECT_EQ(this->harness_.force_release(this->record_key("k1")), StoreError::not_found);  // gone already

  const ClaimOutcome next = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(next.error, StoreError::ok);
  EXPECT_TRUE(next.result.claimed);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-2", binary_response())), StoreError::ok);
}

// Within its lease an in-flight record's request may be executing: a release would let a retry run
// it a second time. Refused, with the time left.
TYPED_TEST(StoreConformance, ForceReleaseOfAnInFlightRecordWithinItsLeaseIsRefused) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  EXPECT_EQ(this->harness_.force_release(this->record_key("k1")), StoreError::lease_running);
  EXPECT_GT(this->harness_.last_lease_left(), 8s);
  EXPECT_LE(this->harness_.last_lease_left(), 10s);
  const ClaimOutcome probe = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(probe.error, StoreError::ok);
  EXPECT_FALSE(probe.result.claimed);
  EXPECT_EQ(probe.result.existing.state, RecordState::in_flight);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
}

TYPED_TEST(StoreConformance, ForceReleaseOfAnInFlightRecordWhoseLeaseLapsedTakesItFromItsOwner) {
  store::ClaimRequest short_lease = this->claim_request("k1", "owner-1");
  short_lease.lease = 1ms;
  ASSERT_TRUE(this->harness_.claim(short_lease).result.claimed);
  this->harness_.let_time_pass(20ms);
  ASSERT_EQ(this->harness_.force_release(this->record_key("k1")), StoreError::ok);

  const ClaimOutcome next = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(next.error, StoreError::ok);
  EXPECT_TRUE(next.result.claimed);
  // The first owner finishing late must not overwrite the new execution.
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::not_owner);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-2", binary_response())), StoreError::ok);
}

TYPED_TEST(StoreConformance, ForceReleaseNeverDeletesAResult) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("done", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("done", "owner-1", binary_response())), StoreError::ok);
  ASSERT_TRUE(this->harness_.claim(this->claim_request("big", "owner-1")).result.claimed);
  ASSERT_EQ(
      this->harness_.complete(this->complete_request("big", "owner-1", binary_response(), RecordState::too_large)),
      StoreError::ok);

  EXPECT_EQ(this->harness_.force_release(this->record_key("done")), StoreError::not_found);
  EXPECT_EQ(this->harness_.force_release(this->record_key("big")), StoreError::not_found);
  EXPECT_EQ(this->harness_.force_release(this->record_key("missing")), StoreError::not_found);

  const ClaimOutcome replay = this->harness_.claim(this->claim_request("done", "owner-2"));
  ASSERT_EQ(replay.error, StoreError::ok);
  ASSERT_FALSE(replay.result.claimed);
  EXPECT_EQ(replay.result.existing.state, RecordState::completed);
  EXPECT_EQ(replay.result.existing.response.body, binary_response().body);
  const ClaimOutcome too_large = this->harness_.claim(this->claim_request("big", "owner-2"));
  ASSERT_EQ(too_large.error, StoreError::ok);
  ASSERT_FALSE(too_large.result.claimed);
  EXPECT_EQ(too_large.result.existing.state, RecordState::too_large);
}

TYPED_TEST(StoreConformance, ForceReleaseOfAnExpiredRecordIsNotFound) {
  store::ClaimRequest request = this->claim_request("k1", "owner-1");
  request.ttl = 300ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  ASSERT_EQ(this->harness_.mark_unknown(this->release_request("k1", "owner-1", request.ttl)), StoreError::ok);
  this->harness_.let_time_pass(450ms);
  EXPECT_EQ(this->harness_.force_release(this->record_key("k1")), StoreError::not_found);
}

// --- inspect ------------------------------------------------------------------------------------

// Both stores report Unix epoch milliseconds from their own clock: close to ours.
void expect_near_wall_clock(std::int64_t epoch_ms) {
  const std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_LT(std::abs(now_ms - epoch_ms), 60'000) << epoch_ms << " vs wall clock " << now_ms;
}

TYPED_TEST(StoreConformance, InspectShowsAnInFlightRecordWithItsLease) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1", "v1:inspected")).result.claimed);
  const InspectOutcome seen = this->harness_.inspect(this->record_key("k1"));
  ASSERT_EQ(seen.error, StoreError::ok);
  const store::RecordInfo& info = seen.info;
  EXPECT_EQ(info.fingerprint, "v1:inspected");
  EXPECT_EQ(info.state, RecordState::in_flight);
  expect_near_wall_clock(info.created_at_ms);
  // lease 10 s and ttl 60 s from the same instant (1 ms of rounding allowed).
  EXPECT_NEAR(info.lease_expires_at_ms - info.created_at_ms, 10'000, 1);
  EXPECT_NEAR(info.expires_at_ms - info.created_at_ms, 60'000, 1);
  EXPECT_EQ(info.completed_at_ms, 0);
  EXPECT_EQ(info.response_status, 0);
  EXPECT_EQ(info.body_bytes, 0u);
}

TYPED_TEST(StoreConformance, InspectShowsACompletedRecordWithoutItsBody) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  this->harness_.let_time_pass(20ms);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  const InspectOutcome seen = this->harness_.inspect(this->record_key("k1"));
  ASSERT_EQ(seen.error, StoreError::ok);
  const store::RecordInfo& info = seen.info;
  EXPECT_EQ(info.state, RecordState::completed);
  EXPECT_EQ(info.response_status, 201);
  // As stored: the body itself, or its sealed form (which also holds the headers) when encrypted.
  EXPECT_EQ(info.body_bytes, this->harness_.stored_body_bytes(binary_response()));
  EXPECT_EQ(info.lease_expires_at_ms, 0);
  EXPECT_GE(info.completed_at_ms, info.created_at_ms + 20);
  EXPECT_LT(info.completed_at_ms, info.expires_at_ms);
  expect_near_wall_clock(info.completed_at_ms);
}

TYPED_TEST(StoreConformance, InspectShowsTooLargeAndUnknownRecords) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("big", "owner-1")).result.claimed);
  ASSERT_EQ(
      this->harness_.complete(this->complete_request("big", "owner-1", binary_response(), RecordState::too_large)),
      StoreError::ok);
  ASSERT_TRUE(this->harness_.claim(this->claim_request("lost", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.mark_unknown(this->release_request("lost", "owner-1")), StoreError::ok);

  const InspectOutcome big = this->harness_.inspect(this->record_key("big"));
  ASSERT_EQ(big.error, StoreError::ok);
  EXPECT_EQ(big.info.state, RecordState::too_large);
  EXPECT_EQ(big.info.response_status, 201);
  EXPECT_EQ(big.info.body_bytes, 0u);  // never stored
  EXPECT_GT(big.info.completed_at_ms, 0);

  const InspectOutcome lost = this->harness_.inspect(this->record_key("lost"));
  ASSERT_EQ(lost.error, StoreError::ok);
  EXPECT_EQ(lost.info.state, RecordState::unknown);
  EXPECT_EQ(lost.info.lease_expires_at_ms, 0);
  EXPECT_EQ(lost.info.completed_at_ms, 0);
  EXPECT_EQ(lost.info.response_status, 0);
  EXPECT_GT(lost.info.expires_at_ms, lost.info.created_at_ms);
}

TYPED_TEST(StoreConformance, InspectOfAMissingOrExpiredRecordIsNotFound) {
  EXPECT_EQ(this->harness_.inspect(this->record_key("missing")).error, StoreError::not_found);
  store::ClaimRequest request = this->claim_request("k1", "owner-1");
  request.ttl = 300ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  ASSERT_EQ(this->harness_.inspect(this->record_key("k1")).error, StoreError::ok);
  this->harness_.let_time_pass(450ms);
  EXPECT_EQ(this->harness_.inspect(this->record_key("k1")).error, StoreError::not_found);
}

// --- expires_in ---------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, ClaimReportsTimeToExpiry) {
  const ClaimOutcome first = this->harness_.claim(this->claim_request("k1", "owner-1"));
  ASSERT_EQ(first.error, StoreError::ok);
  ASSERT_TRUE(first.result.claimed);
  EXPECT_EQ(first.result.existing.expires_in, 60'000ms);  // a fresh record lives its whole ttl

  this->harness_.let_time_pass(50ms);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  const ClaimOutcome replay = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(replay.error, StoreError::ok);
  ASSERT_FALSE(replay.result.claimed);
  EXPECT_GT(replay.result.existing.expires_in, 0ms);
  EXPECT_LE(replay.result.existing.expires_in, 60'000ms - 50ms);  // counted from the first claim
}

// --- sweep_expired ------------------------------------------------------------------------------

// Five records that expire (in every state) and three that do not; sweeping in batches of two
// deletes the five, oldest first, and never a live one.
TYPED_TEST(StoreConformance, SweepDeletesExpiredRecordsInBatchesOldestFirst) {
  const std::vector<std::string> expiring = {"e1", "e2", "e3", "e4", "e5"};  // oldest first
  for (std::size_t i = 0; i < expiring.size(); ++i) {
    store::ClaimRequest request = this->claim_request(expiring[i], "owner-1");
    request.ttl = 200ms + 40ms * static_cast<int>(i);
    ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  }
  ASSERT_EQ(this->harness_.complete(this->complete_request("e1", "owner-1", binary_response())), StoreError::ok);
  ASSERT_EQ(this->harness_.complete(this->complete_request("e2", "owner-1", binary_response(), RecordState::too_large)),
            StoreError::ok);
  ASSERT_EQ(this->harness_.mark_unknown(this->release_request("e3", "owner-1", 280ms)), StoreError::ok);
  for (const char* live : {"l1", "l2", "l3"}) {
    ASSERT_TRUE(this->harness_.claim(this->claim_request(live, "owner-1")).result.claimed);
  }
  ASSERT_EQ(this->harness_.complete(this->complete_request("l1", "owner-1", binary_response())), StoreError::ok);
  ASSERT_EQ(this->harness_.mark_unknown(this->release_request("l2", "owner-1")), StoreError::ok);
  this->harness_.let_time_pass(500ms);
  ASSERT_EQ(this->harness_.records_held(), 8u);  // expired is not deleted

  std::vector<std::size_t> deleted;
  std::vector<std::vector<bool>> held_after;  // which of e1..e5 each sweep left
  for (int sweep = 0; sweep < 6; ++sweep) {
    const SweepOutcome outcome = this->harness_.sweep_expired(2);
    ASSERT_EQ(outcome.error, StoreError::ok);
    deleted.push_back(outcome.deleted);
    std::vector<bool> held;
    for (const std::string& key : expiring) held.push_back(this->harness_.holds(this->record_key(key)));
    held_after.push_back(held);
    if (outcome.deleted == 0) break;
  }
  EXPECT_EQ(deleted, (std::vector<std::size_t>{2, 2, 1, 0}));
  ASSERT_GE(held_after.size(), 3u);
  EXPECT_EQ(held_after[0], (std::vector<bool>{false, false, true, true, true}));
  EXPECT_EQ(held_after[1], (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(held_after[2], (std::vector<bool>(5, false)));

  EXPECT_EQ(this->harness_.records_held(), 3u);  // the live ones, untouched
  for (const char* live : {"l1", "l2", "l3"}) {
    EXPECT_EQ(this->harness_.inspect(this->record_key(live)).error, StoreError::ok) << live;
  }
  EXPECT_EQ(this->harness_.inspect(this->record_key("l1")).info.state, RecordState::completed);
  EXPECT_EQ(this->harness_.inspect(this->record_key("l2")).info.state, RecordState::unknown);
  EXPECT_EQ(this->harness_.inspect(this->record_key("l3")).info.state, RecordState::in_flight);
}

TYPED_TEST(StoreConformance, SweepWithNothingExpiredOrABatchOfZeroDeletesNothing) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("live", "owner-1")).result.claimed);
  const SweepOutcome nothing_expired = this->harness_.sweep_expired(100);
  ASSERT_EQ(nothing_expired.error, StoreError::ok);
  EXPECT_EQ(nothing_expired.deleted, 0u);

  store::ClaimRequest request = this->claim_request("k1", "owner-1");
  request.ttl = 200ms;
  ASSERT_TRUE(this->harness_.claim(request).result.claimed);
  this->harness_.let_time_pass(350ms);
  const SweepOutcome batch_of_zero = this->harness_.sweep_expired(0);
  ASSERT_EQ(batch_of_zero.error, StoreError::ok);
  EXPECT_EQ(batch_of_zero.deleted, 0u);
  EXPECT_EQ(this->harness_.records_held(), 2u);

  // A swept key is free for the next request, as an expired one was.
  const SweepOutcome swept = this->harness_.sweep_expired(100);
  ASSERT_EQ(swept.error, StoreError::ok);
  EXPECT_EQ(swept.deleted, 1u);
  EXPECT_FALSE(this->harness_.holds(this->record_key("k1")));
  EXPECT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-2")).result.claimed);
}

}  // namespace
}  // namespace idem::test
