// The Store contract, checked identically against every backend (memory and Postgres).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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
    return store::CompleteRequest{.scope = scope_, .key = key, .owner = owner, .state = state,
                                  .response = std::move(response)};
  }
  store::ReleaseRequest release_request(const std::string& key, const std::string& owner) const {
    return store::ReleaseRequest{.scope = scope_, .key = key, .owner = owner};
  }

  Harness harness_;
  std::string scope_;
};

using Backends = ::testing::Types<MemoryHarness, PgHarness>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, MemoryHarness>) return "Memory";
    return "Postgres";
  }
};
TYPED_TEST_SUITE(StoreConformance, Backends, BackendNames);

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

TYPED_TEST(StoreConformance, WrongOwnerCanNeitherCompleteNorRelease) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "intruder", binary_response())), StoreError::not_owner);
  EXPECT_EQ(this->harness_.release(this->release_request("k1", "intruder")), StoreError::not_owner);
  // Nothing changed: still in flight, and the real owner still holds it.
  const ClaimOutcome probe = this->harness_.claim(this->claim_request("k1", "owner-2"));
  ASSERT_EQ(probe.error, StoreError::ok);
  EXPECT_FALSE(probe.result.claimed);
  EXPECT_EQ(probe.result.existing.state, RecordState::in_flight);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
}

TYPED_TEST(StoreConformance, CompletedRecordIsNotOwnedAnyMore) {
  ASSERT_TRUE(this->harness_.claim(this->claim_request("k1", "owner-1")).result.claimed);
  ASSERT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::ok);
  EXPECT_EQ(this->harness_.complete(this->complete_request("k1", "owner-1", binary_response())), StoreError::not_owner);
  EXPECT_EQ(this->harness_.release(this->release_request("k1", "owner-1")), StoreError::not_owner);
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

  ASSERT_EQ(this->harness_.complete(this->complete_request("shared-key", "owner-a", binary_response())), StoreError::ok);
  in_b.owner = "owner-b2";
  const ClaimOutcome b_again = this->harness_.claim(in_b);
  ASSERT_EQ(b_again.error, StoreError::ok);
  ASSERT_FALSE(b_again.result.claimed);
  EXPECT_EQ(b_again.result.existing.state, RecordState::in_flight);  // A's completion did not leak into B
  EXPECT_EQ(b_again.result.existing.fingerprint, "v1:b");
}

}  // namespace
}  // namespace idem::test
