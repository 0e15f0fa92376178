// The claim and settle statements through OutboxSource, against the test Postgres: the
// per-aggregate prefix rule, the settle fence, backoff and parking, and concurrent claimers.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <map>
#include <set>
#include <thread>

#include "relay/outbox_source.hpp"
#include "relay/relay_env.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;
using idem::relay::OutboxRow;
using idem::relay::OutboxSource;
using idem::relay::RowSettlement;
using idem::relay::Settlement;

class Claim : public ::testing::Test {
 protected:
  void SetUp() override {
    schema_ = std::make_unique<OutboxSchema>("claim");
    pg::PoolOptions options;
    options.dsn = schema_->dsn();
    options.size = 4;
    source_ = std::make_shared<OutboxSource>(io_, options);
    source_->start();
  }
  void TearDown() override { source_->stop(); }

  void run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(5ms);
      if (io_.stopped()) io_.restart();
    }
    ASSERT_TRUE(done()) << "timed out";
  }

  std::vector<std::int64_t> claim(std::size_t limit, const std::string& token, std::chrono::milliseconds lease = 10s) {
    bool done = false;
    std::vector<std::int64_t> ids;
    source_->claim(limit, token, lease, [&](pg::PgError error, std::vector<OutboxRow> rows) {
      EXPECT_TRUE(error.ok()) << error.message;
      for (const OutboxRow& row : rows) {
        ids.push_back(row.id);
        lane_of_[row.id] = row.lane;
      }
      done = true;
    });
    run_until([&] { return done; });
    return ids;
  }

  std::size_t settle(const std::string& token, const std::vector<std::int64_t>& ids, Settlement outcome,
                     std::chrono::milliseconds delay = 0ms) {
    std::vector<RowSettlement> settlements;
    for (const std::int64_t id : ids)
      settlements.push_back({.id = id, .lane = lane_of_[id], .outcome = outcome, .delay = delay, .error = "boom"});
    bool done = false;
    std::size_t updated = 0;
    source_->settle(token, settlements, [&](pg::PgError error, std::size_t rows) {
      EXPECT_TRUE(error.ok()) << error.message;
      updated = rows;
      done = true;
    });
    run_until([&] { return done; });
    return updated;
  }

  static std::vector<std::int64_t> slice(const std::vector<std::int64_t>& ids, std::size_t from, std::size_t to) {
    return {ids.begin() + static_cast<std::ptrdiff_t>(from), ids.begin() + static_cast<std::ptrdiff_t>(to)};
  }

  boost::asio::io_context io_;
  std::map<std::int64_t, std::int32_t> lane_of_;  // of every row a claim returned
  std::unique_ptr<OutboxSchema> schema_;
  std::shared_ptr<OutboxSource> source_;
};

TEST_F(Claim, TakesPrefixesAndSkipsAggregatesWhoseHeadIsLeased) {
  const auto a = schema_->insert("order", "A", 5);
  const auto b = schema_->insert("order", "B", 5);
  EXPECT_EQ(claim(3, "t1"), slice(a, 0, 3));
  EXPECT_EQ(claim(10, "t2"), b) << "A's later rows wait behind its leased rows";
  EXPECT_TRUE(claim(10, "t3").empty());
  EXPECT_EQ(settle("t1", slice(a, 0, 3), Settlement::published), 3u);
  EXPECT_EQ(claim(10, "t4"), slice(a, 3, 5));
}

TEST_F(Claim, SettleIsFencedByTheBatchToken) {
  const auto a = schema_->insert("order", "A", 3);
  ASSERT_EQ(claim(10, "mine"), a);
  EXPECT_EQ(settle("someone-else", a, Settlement::published), 0u);
  EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL"), 0);
  EXPECT_EQ(settle("mine", a, Settlement::published), 3u);
  EXPECT_EQ(settle("mine", a, Settlement::published), 0u) << "published rows are never settled again";
}

TEST_F(Claim, ExpiredLeaseIsClaimableAgain) {
  const auto a = schema_->insert("order", "A", 2);
  ASSERT_EQ(claim(10, "first", 200ms), a);
  EXPECT_TRUE(claim(10, "second").empty());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(claim(10, "third"), a);
  EXPECT_EQ(settle("first", a, Settlement::published), 0u) << "the lapsed batch lost its rows";
}

// A settle sent by a batch whose lease lapsed meanwhile (a relay paused, a slow network) reaches
// Postgres while another claim runs. Here: batch A leased 10 rows of one aggregate; its lease
// lapsed; batch C took the lane and the first 4 rows, published them and handed the lane back; A's
// stale settle (row 5 published, row 6 parked, 7-10 released as held behind it) goes out while
// claim B does. B's snapshot predates A's settle: before the fix, the lane's version (bumped only
// where the settle still held the lane) told B nothing, B took the lane and rows 5-10, waited for
// A's row locks, then re-took them as A left them: row 5 published again (a duplicate) and row 6
// un-parked, with 7-10 out of order behind it.
// Deterministic: the test holds row 10's lock, so A's settle waits there mid-statement, and B is
// sent only once Postgres shows A waiting.
TEST_F(Claim, AStaleSettleRacingAClaimNeitherDuplicatesNorUnparks) {
  const auto a = schema_->insert("order", "A", 10);
  ASSERT_EQ(claim(10, "stale", 100ms), a);
  std::this_thread::sleep_for(200ms);  // the lease lapses
  ASSERT_EQ(claim(4, "taker"), slice(a, 0, 4));
  ASSERT_EQ(settle("taker", slice(a, 0, 4), Settlement::published), 4u);
  auto client = schema_->client();

  BlockingPg locker(schema_->dsn());
  const std::string locker_pid = std::to_string(locker.scalar_int("SELECT pg_backend_pid()"));
  locker.execute("BEGIN");
  locker.query("SELECT id FROM outbox WHERE id = $1 FOR UPDATE", {std::to_string(a[9])});

  // A's settle, as the relay computes it for that batch.
  std::vector<RowSettlement> stale;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Settlement outcome = i < 5 ? Settlement::published : i == 5 ? Settlement::parked : Settlement::released;
    stale.push_back({.id = a[i], .lane = lane_of_[a[i]], .outcome = outcome, .delay = {}, .error = "refused"});
  }
  bool stale_done = false;
  std::size_t stale_updated = 0;
  source_->settle("stale", stale, [&](pg::PgError error, std::size_t rows) {
    EXPECT_TRUE(error.ok()) << error.message;
    stale_updated = rows;
    stale_done = true;
  });
  auto blocked_by = [&](const std::string& pid) {
    return client.scalar_int("SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))",
                             {pid}) > 0;
  };
  run_until([&] { return blocked_by(locker_pid); });
  ASSERT_FALSE(stale_done);
  const std::string settle_pid = std::to_string(
      client.scalar_int("SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", {locker_pid}));

  // B: its snapshot predates A's settle. It either returns at once or waits for A's locks.
  bool claim_done = false;
  std::vector<std::int64_t> taken;
  source_->claim(10, "late", 10s, [&](pg::PgError error, std::vector<OutboxRow> rows) {
    EXPECT_TRUE(error.ok()) << error.message;
    for (const OutboxRow& row : rows) taken.push_back(row.id);
    claim_done = true;
  });
  run_until([&] { return claim_done || blocked_by(settle_pid); });
  locker.execute("ROLLBACK");
  run_until([&] { return stale_done && claim_done; });

  EXPECT_TRUE(taken.empty()) << "B re-took " << taken.size() << " rows A's settle had just changed";
  EXPECT_EQ(stale_updated, 6u) << "rows 5-10 were still A's";
  EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL"), 5);
  EXPECT_EQ(
      client.scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL AND id = $1", {std::to_string(a[5])}),
      1)
      << "row 6 stays parked";
  EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE claimed_by IS NOT NULL"), 0) << "nothing leased";
  EXPECT_TRUE(claim(10, "next").empty()) << "rows 7-10 wait behind the parked row";
}

// What keeps B off the lane above: a settle bumps the version of every lane its rows are in, also
// one it no longer holds (a claim whose snapshot predates the settle then leaves the lane alone).
TEST_F(Claim, AStaleSettleBumpsTheLanesOfItsRowsItNoLongerHolds) {
  const auto a = schema_->insert("order", "A", 4);
  ASSERT_EQ(claim(4, "stale", 100ms), a);
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(claim(2, "taker"), slice(a, 0, 2));
  ASSERT_EQ(settle("taker", slice(a, 0, 2), Settlement::published), 2u);
  auto client = schema_->client();
  const std::string lane = std::to_string(lane_of_[a[0]]);
  const auto version = [&] { return client.scalar_int("SELECT version FROM outbox_lanes WHERE lane = $1", {lane}); };
  const std::int64_t before = version();
  ASSERT_EQ(client.scalar_int("SELECT count(*) FROM outbox_lanes WHERE lane = $1 AND claimed_by IS NULL", {lane}), 1);

  EXPECT_EQ(settle("stale", a, Settlement::published), 2u) << "rows 3 and 4 were still the stale batch's";
  EXPECT_EQ(version(), before + 1);
  // A settle never hands back a lane another batch holds now.
  ASSERT_EQ(claim(4, "holder"), std::vector<std::int64_t>{});
  const auto b = schema_->insert("order", "A", 1);
  ASSERT_EQ(claim(4, "holder"), b);
  EXPECT_EQ(settle("stale", a, Settlement::published), 0u);
  EXPECT_EQ(client.scalar("SELECT claimed_by FROM outbox_lanes WHERE lane = $1", {lane}), "holder");
}

TEST_F(Claim, RetryAndParkHoldBackOnlyTheirAggregate) {
  const auto a = schema_->insert("order", "A", 3);
  const auto b = schema_->insert("order", "B", 2);
  ASSERT_EQ(claim(2, "t1"), slice(a, 0, 2));
  EXPECT_EQ(settle("t1", slice(a, 0, 1), Settlement::retry, 60s), 1u);
  EXPECT_EQ(settle("t1", slice(a, 1, 2), Settlement::released), 1u);
  EXPECT_EQ(claim(10, "t2"), b) << "A1 backs off for a minute; A2 and A3 wait behind it";
  auto client = schema_->client();
  EXPECT_EQ(client.scalar_int("SELECT attempts FROM outbox WHERE id = $1", {std::to_string(a[0])}), 1);
  EXPECT_EQ(client.scalar_int("SELECT attempts FROM outbox WHERE id = $1", {std::to_string(a[1])}), 0);

  client.query("UPDATE outbox SET available_at = now() WHERE id = $1", {std::to_string(a[0])});
  ASSERT_EQ(claim(1, "t3"), slice(a, 0, 1));
  EXPECT_EQ(settle("t3", slice(a, 0, 1), Settlement::parked), 1u);
  EXPECT_TRUE(claim(10, "t4").empty()) << "a parked head blocks its aggregate";
  client.query("UPDATE outbox SET parked_at = NULL WHERE id = $1", {std::to_string(a[0])});
  EXPECT_EQ(claim(10, "t5"), a);
}

TEST_F(Claim, ConcurrentClaimersNeverReorderAnAggregate) {
  constexpr int kAggregates = 10;
  constexpr int kRows = 30;
  std::map<std::int64_t, std::string> aggregate_of;
  for (int i = 0; i < kAggregates; ++i) {
    for (const std::int64_t id : schema_->insert("order", "agg-" + std::to_string(i), kRows)) {
      aggregate_of[id] = "agg-" + std::to_string(i);
    }
  }
  // Four claim loops share the pool: claim 7, record the order of publication, settle, repeat.
  std::vector<std::int64_t> publication_order;
  std::set<std::int64_t> seen;
  int duplicates = 0;
  int running = 4;
  int batch_number = 0;
  std::function<void(int)> loop = [&](int worker) {
    const std::string token = "w" + std::to_string(worker) + "-" + std::to_string(++batch_number);
    source_->claim(7, token, 10s, [&, worker, token](pg::PgError error, std::vector<OutboxRow> rows) {
      ASSERT_TRUE(error.ok()) << error.message;
      if (rows.empty() && seen.size() == aggregate_of.size()) {
        --running;
        return;
      }
      std::vector<RowSettlement> settlements;
      for (const OutboxRow& row : rows) {
        if (!seen.insert(row.id).second) ++duplicates;
        publication_order.push_back(row.id);
        settlements.push_back(
            {.id = row.id, .lane = row.lane, .outcome = Settlement::published, .delay = {}, .error = {}});
      }
      source_->settle(token, settlements, [&, worker](pg::PgError settle_error, std::size_t) {
        ASSERT_TRUE(settle_error.ok()) << settle_error.message;
        loop(worker);
      });
    });
  };
  for (int worker = 0; worker < 4; ++worker) loop(worker);
  run_until([&] { return running == 0; });
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(seen.size(), aggregate_of.size());
  std::map<std::string, std::int64_t> last;
  for (const std::int64_t id : publication_order) {
    auto [it, inserted] = last.try_emplace(aggregate_of[id], id);
    if (!inserted) {
      EXPECT_GT(id, it->second) << aggregate_of[id];
      it->second = id;
    }
  }
}

}  // namespace
}  // namespace idem::test::relay
