// Round trips per operation, counted in the connection layer (statements sent): a first request
// costs a claim and a complete, a replay costs one claim; every other operation is one statement.
// The same with prepared statements: a statement's prepare travels with its first execution.
#include "integration/pg_test_env.hpp"
#include "pg/counters.hpp"

namespace idem::test {
namespace {

using store::StoreError;

// The parameter: prepared statements on.
class RoundTrips : public PgTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PgTest::SetUp());
    store_ = std::make_unique<store::pg::PgStore>(
        io_, pg::PoolOptions{.dsn = dsn(), .size = 1, .prepared_statements = GetParam()});
    store_->start();
    ASSERT_TRUE(run_until(io_, [&] { return store_->connected(); }));
  }

  // Statements sent while `operation` ran to completion.
  std::uint64_t statements_for(const std::function<void(std::function<void()> done)>& operation) {
    const auto before = pg::pg_counters().statements_sent.load();
    bool finished = false;
    operation([&] { finished = true; });
    EXPECT_TRUE(run_until(io_, [&] { return finished; }));
    return pg::pg_counters().statements_sent.load() - before;
  }

  boost::asio::io_context io_{1};
  std::unique_ptr<store::pg::PgStore> store_;
};

TEST_P(RoundTrips, ClaimCompleteReplayAndReleaseAreOneStatementEach) {
  const std::string scope = fresh_name("round-trips-");
  std::optional<core::ClaimResult> claim;
  EXPECT_EQ(statements_for([&](auto done) {
              store_->claim(claim_request(scope, "k", "owner-1"), [&, done](StoreError error, core::ClaimResult result) {
                EXPECT_EQ(error, StoreError::ok);
                claim = std::move(result);
                done();
              });
            }),
            1u);
  ASSERT_TRUE(claim && claim->claimed);

  core::StoredResponse response;
  response.status = 200;
  response.headers = {{"Content-Type", "text/plain"}};
  response.body = "done";
  EXPECT_EQ(statements_for([&](auto done) {
              store_->complete({.scope = scope, .key = "k", .owner = "owner-1", .response = response, .ttl = std::chrono::seconds(60)},
                               [&, done](StoreError error) {
                                 EXPECT_EQ(error, StoreError::ok);
                                 done();
                               });
            }),
            1u);

  std::optional<core::ClaimResult> replay;
  EXPECT_EQ(statements_for([&](auto done) {
              store_->claim(claim_request(scope, "k", "owner-2"), [&, done](StoreError error, core::ClaimResult result) {
                EXPECT_EQ(error, StoreError::ok);
                replay = std::move(result);
                done();
              });
            }),
            1u);
  ASSERT_TRUE(replay && !replay->claimed);
  EXPECT_EQ(replay->existing.state, core::RecordState::completed);
  EXPECT_EQ(replay->existing.response.body, "done");

  bool released_claimed = false;
  EXPECT_EQ(statements_for([&](auto done) {
              store_->claim(claim_request(scope, "released", "owner-3"), [&, done](StoreError error, core::ClaimResult result) {
                released_claimed = error == StoreError::ok && result.claimed;
                done();
              });
            }),
            1u);
  ASSERT_TRUE(released_claimed);
  EXPECT_EQ(statements_for([&](auto done) {
              store_->release({.scope = scope, .key = "released", .owner = "owner-3"}, [&, done](StoreError error) {
                EXPECT_EQ(error, StoreError::ok);
                done();
              });
            }),
            1u);
}

TEST_P(RoundTrips, MarkUnknownForceReleaseInspectAndSweepAreOneStatementEach) {
  const std::string scope = fresh_name("round-trips-");
  bool claimed = false;
  EXPECT_EQ(statements_for([&](auto done) {
              store_->claim(claim_request(scope, "k", "owner-1"), [&, done](StoreError error, core::ClaimResult result) {
                claimed = error == StoreError::ok && result.claimed;
                done();
              });
            }),
            1u);
  ASSERT_TRUE(claimed);
  EXPECT_EQ(statements_for([&](auto done) {
              store_->mark_unknown({.scope = scope, .key = "k", .owner = "owner-1", .ttl = std::chrono::seconds(60)}, [&, done](StoreError error) {
                EXPECT_EQ(error, StoreError::ok);
                done();
              });
            }),
            1u);
  EXPECT_EQ(statements_for([&](auto done) {
              store_->inspect({.scope = scope, .key = "k"}, [&, done](StoreError error, store::RecordInfo info) {
                EXPECT_EQ(error, StoreError::ok);
                EXPECT_EQ(info.state, core::RecordState::unknown);
                done();
              });
            }),
            1u);
  EXPECT_EQ(statements_for([&](auto done) {
              store_->force_release({.scope = scope, .key = "k"}, [&, done](StoreError error, std::chrono::milliseconds) {
                EXPECT_EQ(error, StoreError::ok);
                done();
              });
            }),
            1u);
  EXPECT_EQ(statements_for([&](auto done) {
              store_->sweep_expired(10, [&, done](StoreError error, std::size_t) {
                EXPECT_EQ(error, StoreError::ok);
                done();
              });
            }),
            1u);
}

INSTANTIATE_TEST_SUITE_P(StatementModes, RoundTrips, ::testing::Bool(), [](const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "Prepared" : "Unnamed";
});

}  // namespace
}  // namespace idem::test
