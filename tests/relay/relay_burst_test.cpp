// Bursts into an idle relay, in the shapes that used to stall its claim: an outbox never analyzed
// (as after a deploy: the planner's estimates are guesses), thousands of one-row aggregates, and a
// few aggregates with deep runs claimed 1,000 rows at a time. Each must drain within a bound with
// not one statement timeout, every event exactly once in the stream, each aggregate in order.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "relay/relay_env.hpp"
#include "relay/relay_fixture.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class RelayBurst : public RelayFixture {
 protected:
  void SetUp() override {
    RelayFixture::SetUp();
    // Never analyzed for the whole test: autovacuum must not analyze it half-way.
    schema_->client().query("ALTER TABLE outbox SET (autovacuum_enabled = false)");
    settings_.lease = "30s";
    // A pipeline of 1,000 publishes can outlast the suite's 500 ms Redis timeout on a loaded
    // machine; these tests watch the claim's plan, not the sink.
    settings_.command_timeout = "5s";
  }

  // `rows` rows over `aggregates` aggregates ('agg-0'...), committed at once, ids in insert order.
  void burst(int rows, int aggregates) {
    schema_->client().query(
        "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) "
        "SELECT 'order', 'agg-' || (g % $2::int), 'happened', jsonb_build_object('n', g) "
        "FROM generate_series(1, $1::int) AS g",
        {std::to_string(rows), std::to_string(aggregates)});
  }

  // Starts the relay on the empty outbox, lets it go idle, commits the burst and waits for it.
  void expect_burst_drains(int rows, int aggregates, std::chrono::seconds bound) {
    const RelayRunner runner(dir_->path(), settings_);
    Process relay = runner.start("relay");
    std::this_thread::sleep_for(500ms);  // idle: its first claims found nothing
    const auto committed = Clock::now();
    burst(rows, aggregates);
    ASSERT_TRUE(drained(bound)) << unpublished() << " rows left after " << bound.count() << " s\n" << relay.describe();
    const double seconds = std::chrono::duration<double>(Clock::now() - committed).count();
    ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
    const std::string log = relay.stderr_text();

    for (const char* symptom : {"timed out", "statement timeout", "\"event\":\"backing_off\""}) {
      EXPECT_EQ(log.find(symptom), std::string::npos) << "the relay logged \"" << symptom << "\"\n"
                                                      << log.substr(0, 4000);
    }
    EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM pg_stat_user_tables WHERE relid = 'outbox'::regclass "
                                           "AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)"),
              0)
        << "the outbox was analyzed: the test no longer shows a never-analyzed table";
    const auto entries = read_stream(*redis_, stream("order"));
    const StreamAudit result = audit(entries);
    EXPECT_EQ(entries.size(), static_cast<std::size_t>(rows)) << "one entry per event";
    EXPECT_EQ(result.copies.size(), static_cast<std::size_t>(rows));
    EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
    EXPECT_EQ(stopped_field(log, "published"), rows);
    EXPECT_EQ(stopped_field(log, "duplicates"), 0);
    std::cout << "[ burst    ] " << rows << " rows over " << aggregates << " aggregates, batch " << settings_.batch_size
              << ": drained in " << seconds << " s (" << static_cast<int>(rows / seconds) << " rows/s)\n";
  }
};

// The shape of the incident: 20,000 one-row aggregates (the old claim ran ~680 rows/s here and
// JIT-compiled every claim). The bound is 20 s, 1,000 rows/s, to hold under sanitizers too.
TEST_F(RelayBurst, ANeverAnalyzedOutboxDrainsABurstOfOneRowAggregatesWithoutATimeout) {
  settings_.batch_size = 500;
  expect_burst_drains(20'000, 20'000, 20s);
}

// 40 aggregates of 500 rows claimed 1,000 at a time (the old claim hit statement_timeout on every
// claim and published nothing).
TEST_F(RelayBurst, DeepAggregateRunsDrainWithBatch1000InOrder) {
  settings_.batch_size = 1000;
  expect_burst_drains(20'000, 40, 20s);
}

}  // namespace
}  // namespace idem::test::relay
