// sweep_expired against a real server: several sweepers at once (each expired record deleted by
// exactly one of them, none waits, none fails), rows another session holds are skipped, and a
// claim meeting a row being swept waits for the sweep and then claims. Every test has a schema
// of its own: a sweep deletes expired records of every scope, other tests' included.
#include <barrier>
#include <regex>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "integration/pg_private_schema.hpp"
#include "integration/pg_test_env.hpp"
#include "support/fault_proxy.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using store::StoreError;

class Sweep : public PgTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PgTest::SetUp());
    schema_ = std::make_unique<PrivateSchema>(dsn(), "sweep");
    ASSERT_TRUE(schema_->ok()) << schema_->error();
    client_ = std::make_unique<BlockingPg>(schema_->dsn());
    ASSERT_TRUE(client_->ok()) << client_->error();
  }
  void TearDown() override {
    client_.reset();
    schema_.reset();
  }

  pg::PoolOptions pool(std::size_t size) const {
    return {.dsn = schema_->dsn(), .size = size, .connect_timeout = 5s, .query_timeout = 2s, .acquire_timeout = 5s};
  }

  // `count` records of `scope` named k0, k1... that expired one millisecond apart, k0 first.
  void insert_expired(const std::string& scope, int count) {
    ASSERT_TRUE(client_->try_column(
        "INSERT INTO idempotency_records (scope, key, fingerprint, state, owner, created_at, lease_expires_at, "
        "                                 completed_at, expires_at, response_status, response_body) "
        "SELECT $1, 'k' || g, 'v1:sweep', 'completed', 'o', now() - interval '1 hour', NULL, "
        "       now() - interval '1 hour', now() - interval '1 minute' + g * interval '1 millisecond', 200, '\\x00ff' "
        "  FROM generate_series(0, $2::int - 1) AS g",
        {scope, std::to_string(count)}))
        << client_->error();
  }
  void insert_live(const std::string& scope, int count) {
    ASSERT_TRUE(client_->try_column(
        "INSERT INTO idempotency_records (scope, key, fingerprint, state, owner, created_at, lease_expires_at, "
        "                                 expires_at) "
        "SELECT $1, 'live' || g, 'v1:sweep', 'in_flight', 'o', now(), now() + interval '1 minute', "
        "       now() + interval '1 hour' "
        "  FROM generate_series(0, $2::int - 1) AS g",
        {scope, std::to_string(count)}))
        << client_->error();
  }
  int count(const std::string& where) {
    const auto rows = client_->try_column("SELECT count(*) FROM idempotency_records WHERE " + where);
    EXPECT_TRUE(rows && rows->size() == 1) << client_->error();
    return rows && rows->size() == 1 ? std::stoi(rows->front()) : -1;
  }

  std::unique_ptr<PrivateSchema> schema_;
  std::unique_ptr<BlockingPg> client_;  // connected to the private schema
};

struct SweepResult {
  std::optional<StoreError> error;  // unset: the handler did not run in time
  std::size_t deleted = 0;
};

SweepResult sweep_once(boost::asio::io_context& io, store::Store& store, std::size_t batch) {
  auto result = std::make_shared<SweepResult>();
  store.sweep_expired(batch, [result](StoreError error, std::size_t deleted) {
    result->error = error;
    result->deleted = deleted;
  });
  run_until(io, [&] { return result->error.has_value(); });
  return *result;
}

TEST_F(Sweep, ConcurrentSweepersDeleteEveryExpiredRecordExactlyOnce) {
  constexpr int kExpired = 3000;
  constexpr int kLive = 100;
  constexpr int kThreads = 2;            // two stores, as two proxy processes
  constexpr int kChainsPerThread = 2;    // sweeps in flight at once on each store
  constexpr std::size_t kBatch = 100;
  constexpr int kMaxSweepsPerChain = 200;
  ASSERT_NO_FATAL_FAILURE(insert_expired("mine", kExpired));
  ASSERT_NO_FATAL_FAILURE(insert_live("mine", kLive));

  struct Tally {
    std::size_t deleted = 0;
    int sweeps = 0;
    int oversized = 0;  // a sweep that deleted more than the batch
    std::vector<std::string> failures;
  };
  std::vector<Tally> tallies(kThreads);
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      Tally& tally = tallies[thread];
      boost::asio::io_context io(1);
      store::pg::PgStore store(io, pool(kChainsPerThread));
      store.start();
      if (!run_until(io, [&] { return store.connected(); })) tally.failures.push_back("no connection");
      start.arrive_and_wait();
      // Each chain sweeps again as soon as its previous sweep answered, until one deletes nothing.
      int chains_running = kChainsPerThread;
      std::function<void(int)> sweep_chain = [&](int sweeps_done) {
        store.sweep_expired(kBatch, [&, sweeps_done](StoreError error, std::size_t deleted) {
          ++tally.sweeps;
          tally.deleted += deleted;
          if (deleted > kBatch) ++tally.oversized;
          if (error != StoreError::ok) tally.failures.push_back(std::string(store::store_error_name(error)));
          if (error == StoreError::ok && deleted > 0 && sweeps_done + 1 < kMaxSweepsPerChain) {
            sweep_chain(sweeps_done + 1);
          } else {
            --chains_running;
          }
        });
      };
      for (int chain = 0; chain < kChainsPerThread; ++chain) sweep_chain(0);
      if (!run_until(io, [&] { return chains_running == 0; }, 60s)) tally.failures.push_back("sweeps did not finish");
    });
  }
  for (std::thread& thread : threads) thread.join();

  std::size_t total = 0;
  for (int thread = 0; thread < kThreads; ++thread) {
    EXPECT_TRUE(tallies[thread].failures.empty())
        << "thread " << thread << ": " << tallies[thread].failures.size() << " failures, first "
        << tallies[thread].failures.front();
    EXPECT_EQ(tallies[thread].oversized, 0) << "thread " << thread;
    total += tallies[thread].deleted;
  }
  // The schema is ours alone: every deletion counted is one of our expired rows, and a row
  // deleted twice would be counted twice.
  EXPECT_EQ(total, static_cast<std::size_t>(kExpired));
  EXPECT_EQ(count("expires_at <= now()"), 0);
  EXPECT_EQ(count("expires_at > now()"), kLive);
  std::cout << "sweeps per thread: " << tallies[0].sweeps << ", " << tallies[1].sweeps << "; deleted per thread: "
            << tallies[0].deleted << ", " << tallies[1].deleted << "\n";
}

TEST_F(Sweep, RowsLockedByAnotherSessionAreSkippedWithoutWaiting) {
  ASSERT_NO_FATAL_FAILURE(insert_expired("mine", 20));
  // Another session holds the five oldest, as a sweeper in mid-statement or a claim would.
  BlockingPg holder(schema_->dsn());
  ASSERT_TRUE(holder.ok()) << holder.error();
  ASSERT_TRUE(holder.try_column("BEGIN")) << holder.error();
  const auto held = holder.try_column("SELECT key FROM idempotency_records ORDER BY expires_at LIMIT 5 FOR UPDATE");
  ASSERT_TRUE(held && held->size() == 5) << holder.error();

  boost::asio::io_context io(1);
  store::pg::PgStore store(io, pool(1));
  store.start();
  ASSERT_TRUE(run_until(io, [&] { return store.connected(); }));

  const auto started = std::chrono::steady_clock::now();
  const SweepResult first = sweep_once(io, store, 100);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(first.error, StoreError::ok);
  EXPECT_EQ(first.deleted, 15u);
  EXPECT_LT(took, 1s);  // the statement deadline is 2 s: it did not wait for the locks
  const SweepResult second = sweep_once(io, store, 100);
  ASSERT_EQ(second.error, StoreError::ok);
  EXPECT_EQ(second.deleted, 0u);
  EXPECT_EQ(count("key IN ('k0', 'k1', 'k2', 'k3', 'k4')"), 5);
  EXPECT_EQ(count("true"), 5);

  ASSERT_TRUE(holder.try_column("ROLLBACK")) << holder.error();
  const SweepResult after = sweep_once(io, store, 100);
  ASSERT_EQ(after.error, StoreError::ok);
  EXPECT_EQ(after.deleted, 5u);
  EXPECT_EQ(count("true"), 0);
}

TEST_F(Sweep, ClaimOfARecordBeingSweptWaitsForTheSweepThenClaims) {
  ASSERT_NO_FATAL_FAILURE(insert_expired("mine", 1));  // key k0
  // A sweep in mid-statement: the expired row deleted but not yet committed.
  BlockingPg sweeper(schema_->dsn());
  ASSERT_TRUE(sweeper.ok()) << sweeper.error();
  ASSERT_TRUE(sweeper.try_column("BEGIN")) << sweeper.error();
  ASSERT_TRUE(sweeper.try_column("DELETE FROM idempotency_records WHERE scope = 'mine' AND key = 'k0'")) << sweeper.error();

  boost::asio::io_context io(1);
  store::pg::PgStore store(io, pool(1));
  store.start();
  ASSERT_TRUE(run_until(io, [&] { return store.connected(); }));
  auto outcome = std::make_shared<std::optional<std::pair<StoreError, core::ClaimResult>>>();
  store.claim(claim_request("mine", "k0", "owner-1"), [outcome](StoreError error, core::ClaimResult result) {
    *outcome = std::make_pair(error, std::move(result));
  });
  EXPECT_FALSE(run_until(io, [&] { return outcome->has_value(); }, 300ms)) << "the claim did not wait for the row";

  ASSERT_TRUE(sweeper.try_column("COMMIT")) << sweeper.error();
  ASSERT_TRUE(run_until(io, [&] { return outcome->has_value(); }));
  EXPECT_EQ((*outcome)->first, StoreError::ok);
  EXPECT_TRUE((*outcome)->second.claimed);
  EXPECT_EQ(count("key = 'k0' AND state = 'in_flight' AND owner = 'owner-1'"), 1);
}

// What a fault proxy does to one sweep statement.
enum class SweepFault {
  reply_lost_reset,           // committed, the answer swallowed, the connection reset
  reply_lost_hang,            // committed, the answer swallowed, the connection silent
  dropped_before_the_server,  // never forwarded: nothing deleted
  slow_past_the_deadline,     // committed, answered after query_timeout
};

std::string name_of(SweepFault fault) {
  switch (fault) {
    case SweepFault::reply_lost_reset: return "ReplyLostThenReset";
    case SweepFault::reply_lost_hang: return "ReplyLostThenHung";
    case SweepFault::dropped_before_the_server: return "DroppedBeforeTheServer";
    case SweepFault::slow_past_the_deadline: return "SlowerThanTheDeadline";
  }
  return "Unknown";
}
void PrintTo(SweepFault fault, std::ostream* out) { *out << name_of(fault); }  // names ctest's entries

// One sweep meets `fault`: the reaper hears reply_lost (not a failure to alarm anyone: the next
// tick runs the same statement), what it deleted stays deleted, and the next sweeps carry on with
// the rest over a new connection. Nothing live is touched either way.
class SweepFaults : public Sweep, public ::testing::WithParamInterface<SweepFault> {};

TEST_P(SweepFaults, TheReaperHearsReplyLostAndTheNextSweepsCarryOn) {
  const SweepFault fault = GetParam();
  ASSERT_NO_FATAL_FAILURE(insert_expired("mine", 250));
  ASSERT_NO_FATAL_FAILURE(insert_live("mine", 10));
  std::smatch port;
  ASSERT_TRUE(std::regex_search(dsn(), port, std::regex(R"(port=(\d+))"))) << dsn();
  FaultProxy postgres("127.0.0.1", static_cast<std::uint16_t>(std::stoi(port[1])));
  const FaultProxy::Matcher sweep = contains_all({"expires_at <= now()"});
  switch (fault) {
    case SweepFault::reply_lost_reset: postgres.lose_next_reply(sweep, FaultProxy::AfterLoss::reset); break;
    case SweepFault::reply_lost_hang: postgres.lose_next_reply(sweep, FaultProxy::AfterLoss::hang); break;
    case SweepFault::dropped_before_the_server: postgres.drop_next_request(sweep, FaultProxy::AfterLoss::reset); break;
    case SweepFault::slow_past_the_deadline: postgres.delay_next_reply(sweep, 2s); break;
  }

  boost::asio::io_context io(1);
  pg::PoolOptions options = pool(1);
  options.query_timeout = 1s;
  options.dsn = dsn_with(dsn_with(options.dsn, "port", std::to_string(postgres.port())), "sslmode", "disable");
  store::pg::PgStore store(io, options);
  store.start();
  const auto started = std::chrono::steady_clock::now();
  const SweepResult lost = sweep_once(io, store, 100);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(postgres.wait_fired(1, 0ms));
  ASSERT_TRUE(lost.error.has_value());
  EXPECT_EQ(*lost.error, StoreError::reply_lost);
  EXPECT_LT(took, 1500ms) << "the sweep outlived query_timeout";
  const bool committed = fault != SweepFault::dropped_before_the_server;
  EXPECT_EQ(count("scope = 'mine' AND expires_at <= now()"), committed ? 150 : 250)
      << (committed ? "the lost sweep did not commit its batch" : "a sweep that never ran deleted rows");

  std::size_t deleted = 0;
  for (int sweep_number = 0; sweep_number < 5 && count("scope = 'mine' AND expires_at <= now()") > 0; ++sweep_number) {
    const SweepResult next = sweep_once(io, store, 100);
    ASSERT_TRUE(next.error.has_value());
    ASSERT_EQ(*next.error, StoreError::ok);
    deleted += next.deleted;
  }
  EXPECT_EQ(deleted, committed ? 150u : 250u);
  EXPECT_EQ(count("scope = 'mine' AND expires_at <= now()"), 0);
  EXPECT_EQ(count("scope = 'mine'"), 10) << "a live record was swept";
}

INSTANTIATE_TEST_SUITE_P(EveryFault, SweepFaults,
                         ::testing::Values(SweepFault::reply_lost_reset, SweepFault::reply_lost_hang,
                                           SweepFault::dropped_before_the_server, SweepFault::slow_past_the_deadline),
                         [](const ::testing::TestParamInfo<SweepFault>& info) { return name_of(info.param); });

}  // namespace
}  // namespace idem::test
