// A claim that commits after its proxy gave up on it never holds the key. The proxy gives up on a
// claim whose reply was lost and releases it by owner token; that release may find nothing to
// delete while the claim's INSERT is still in progress (its commit waiting for a synchronous
// standby, or the statement queued in a pooler), so it fences the owner. These tests make the
// late commit deterministic: another session holds the claim's row uncommitted in an explicit
// transaction while the store's release runs, then commits.
#include "integration/pg_test_env.hpp"

#include <optional>
#include <utility>

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using store::StoreError;

// The row a claim by `owner` inserts, as kClaim writes it, lease running for a minute.
constexpr const char* kInsertClaimRow =
    "INSERT INTO idempotency_records (scope, key, fingerprint, state, owner, created_at, lease_expires_at, expires_at) "
    "VALUES ($1, $2, 'v2:late', 'in_flight', $3, now(), now() + interval '1 minute', now() + interval '1 hour')";
constexpr const char* kFencesOf = "SELECT count(*) FROM idempotency_fences WHERE scope = $1 AND key = $2";

class LateClaim : public PgTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PgTest::SetUp());
    store_.emplace(io_, pg::PoolOptions{.dsn = dsn(), .size = 2});
    store_->start();
    ASSERT_TRUE(run_until(io_, [&] { return store_->connected(); }));
    scope_ = fresh_name("late-");
    key_ = fresh_name("key-");
  }

  std::pair<StoreError, core::ClaimResult> claim(const std::string& owner) {
    std::optional<std::pair<StoreError, core::ClaimResult>> outcome;
    store_->claim(claim_request(scope_, key_, owner),
                  [&](StoreError error, core::ClaimResult result) { outcome.emplace(error, std::move(result)); });
    EXPECT_TRUE(run_until(io_, [&] { return outcome.has_value(); }));
    return outcome.value_or(std::make_pair(StoreError::internal, core::ClaimResult{}));
  }

  StoreError release(const std::string& owner, std::chrono::milliseconds ttl = 60s) {
    std::optional<StoreError> outcome;
    store_->release(store::ReleaseRequest{.scope = scope_, .key = key_, .owner = owner, .ttl = ttl},
                    [&](StoreError error) { outcome = error; });
    EXPECT_TRUE(run_until(io_, [&] { return outcome.has_value(); }));
    return outcome.value_or(StoreError::internal);
  }

  std::int64_t fences(BlockingPg& session) { return session.scalar_int(kFencesOf, {scope_, key_}); }

  boost::asio::io_context io_{1};
  std::optional<store::pg::PgStore> store_;
  std::string scope_;
  std::string key_;
};

TEST_F(LateClaim, AClaimCommittedAfterItsReleaseIsTakenOverByTheNextClaimWithinItsLease) {
  BlockingPg late(dsn());
  ASSERT_TRUE(late.try_column("BEGIN")) << late.error();
  ASSERT_TRUE(late.try_column(kInsertClaimRow, {scope_, key_, "given-up"})) << late.error();

  // The release cannot see the uncommitted row: nothing deleted, the owner fenced.
  EXPECT_EQ(release("given-up"), StoreError::not_owner);
  ASSERT_TRUE(late.try_column("COMMIT")) << late.error();

  BlockingPg observer(dsn());
  EXPECT_EQ(observer.scalar("SELECT owner FROM idempotency_records WHERE scope = $1 AND key = $2", {scope_, key_}),
            "given-up")
      << "the late claim's row committed after the release";
  EXPECT_EQ(fences(observer), 1);

  // Its lease runs for another minute, but its proxy never forwarded the request: the key is free.
  const auto [error, result] = claim("retry-owner");
  ASSERT_EQ(error, StoreError::ok);
  EXPECT_TRUE(result.claimed) << "the late claim's record locked the key";
  EXPECT_EQ(observer.scalar("SELECT owner FROM idempotency_records WHERE scope = $1 AND key = $2", {scope_, key_}),
            "retry-owner");
}

TEST_F(LateClaim, AClaimWaitingOnTheLateInsertTakesTheKeyOnceItCommits) {
  BlockingPg late(dsn());
  ASSERT_TRUE(late.try_column("BEGIN")) << late.error();
  ASSERT_TRUE(late.try_column(kInsertClaimRow, {scope_, key_, "given-up"})) << late.error();
  EXPECT_EQ(release("given-up"), StoreError::not_owner);

  // A retry's claim meets the uncommitted row and waits for it.
  std::optional<std::pair<StoreError, core::ClaimResult>> outcome;
  store_->claim(claim_request(scope_, key_, "retry-owner"),
                [&](StoreError error, core::ClaimResult result) { outcome.emplace(error, std::move(result)); });
  EXPECT_FALSE(run_until(
      io_, [&] { return outcome.has_value(); }, 300ms))
      << "the claim did not wait for the insert";
  ASSERT_TRUE(late.try_column("COMMIT")) << late.error();

  ASSERT_TRUE(run_until(io_, [&] { return outcome.has_value(); }));
  EXPECT_EQ(outcome->first, StoreError::ok);
  EXPECT_TRUE(outcome->second.claimed) << "the fenced owner's record was read as in flight";
}

TEST_F(LateClaim, AClaimThatRunsAfterItsOwnersReleaseInsertsNothing) {
  // The release runs first (the claim is still queued in a pooler), then the claim itself.
  EXPECT_EQ(release("given-up"), StoreError::not_owner);
  const auto [error, result] = claim("given-up");
  EXPECT_NE(error, StoreError::ok) << "a claim given up on answered as if it held something";
  EXPECT_FALSE(result.claimed);
  BlockingPg observer(dsn());
  EXPECT_EQ(
      observer.scalar_int("SELECT count(*) FROM idempotency_records WHERE scope = $1 AND key = $2", {scope_, key_}), 0);
  EXPECT_TRUE(claim("retry-owner").second.claimed);
}

TEST_F(LateClaim, AReleaseThatDeletesTheRecordLeavesNoFence) {
  ASSERT_TRUE(claim("owner-1").second.claimed);
  EXPECT_EQ(release("owner-1"), StoreError::ok);
  BlockingPg observer(dsn());
  EXPECT_EQ(fences(observer), 0) << "a release that found its record wrote a fence it does not need";
}

TEST_F(LateClaim, AFenceLastsAtLeastAnHourAndIsSweptOnceExpired) {
  EXPECT_EQ(release("given-up", 200ms), StoreError::not_owner);
  BlockingPg observer(dsn());
  ASSERT_EQ(fences(observer), 1);
  // A short ttl still leaves the fence an hour: a claim queued in a pooler runs after its release.
  EXPECT_GE(observer.scalar_int("SELECT extract(epoch FROM expires_at - now())::int8 FROM idempotency_fences "
                                "WHERE scope = $1 AND key = $2",
                                {scope_, key_}),
            3'590);
  // Aged past its expiry by hand, it goes with the next sweeps.
  observer.execute(
      "UPDATE idempotency_fences SET expires_at = now() - interval '1 second' WHERE scope = $1 AND key = $2",
      {scope_, key_});
  // Other tests' expired rows share the table: sweep until ours is gone (bounded).
  for (int sweeps = 0; sweeps < 50 && fences(observer) > 0; ++sweeps) {
    std::optional<StoreError> swept;
    store_->sweep_expired(500, [&](StoreError error, std::size_t) { swept = error; });
    ASSERT_TRUE(run_until(io_, [&] { return swept.has_value(); }));
    ASSERT_EQ(*swept, StoreError::ok);
  }
  EXPECT_EQ(fences(observer), 0);
}

}  // namespace
}  // namespace idem::test
