// idemrelay with its Postgres crashing under it (`pg_ctl stop -m immediate`: every backend dies at
// once) and coming back: a private cluster per test, so the suite's shared one stays up. The relay
// must ride the outage out (no exit), say so in its log and on /readyz, and afterwards deliver
// every row exactly once, in order per aggregate, also a batch it had published but not marked.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <csignal>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "relay/relay_env.hpp"
#include "relay/relay_faults.hpp"
#include "relay/relay_fixture.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/redis_client.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kProbeTimeout{2'000};
constexpr int kRowsPerAggregate = 10;
// What the relay logs when it gives a batch up because its settle kept failing (relay.cpp).
constexpr const char* kBatchGivenUp = "\"event\":\"settle_given_up\"";
// What it logs for each failed settle it will retry.
constexpr const char* kSettleRetried = "\"event\":\"settle_failed\"";

class RelayPostgresOutage : public RelayFixture {
 protected:
  RelayPostgresOutage() : RelayFixture(RelayDatabase::private_cluster) {}

  std::string order_stream() const { return stream("order"); }
  // Starts a relay whose sink goes through `redis` and stops it (SIGSTOP) between its first
  // publish and that batch's settle: Redis ran the batch, and the relay reads the answer only when
  // it resumes. Check is_stopped before relying on it.
  Process start_stopped_after_first_publish(FaultProxy& redis) {
    hold_next_reply(redis, publish_script());
    settings_.redis_port = redis.port();
    Process relay = RelayRunner(dir_->path(), settings_).start("relay");
    stop_while_reply_held(redis, relay, 10s);
    return relay;
  }
  // The stream holds the whole first batch (30 rows); Redis may still be running its last rows.
  bool first_batch_in_stream() {
    return eventually([&] { return read_stream(*redis_, order_stream()).size() == 3u * kRowsPerAggregate; }, 5s);
  }
  void insert_rows(std::initializer_list<const char*> aggregates) {
    for (const char* aggregate : aggregates) schema_->insert("order", aggregate, kRowsPerAggregate);
  }
  // /readyz's status; 0 when the admin listener did not answer.
  int readiness() { return send(settings_.admin_port, HttpRequest::get("/readyz"), kProbeTimeout).status; }
  static bool log_has(const Process& relay, const std::string& needle) {
    return relay.stderr_text().find(needle) != std::string::npos;
  }

  // Log processors read one JSON object per line; an outage must not slip raw libpq text in
  // (connection errors, the server's shutdown notices).
  static void expect_every_line_is_json(const std::string& log) {
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
      boost::system::error_code error;
      const auto value = boost::json::parse(line, error);
      EXPECT_TRUE(!error && value.is_object()) << "not a JSON log line: " << line;
    }
  }

  // The stream holds `expected` entries, each event once, every aggregate in id order.
  void expect_each_event_once_in_order(std::size_t expected) {
    const auto entries = read_stream(*redis_, order_stream());
    const StreamAudit result = audit(entries);
    EXPECT_EQ(entries.size(), expected);
    EXPECT_EQ(result.copies.size(), expected);
    for (const auto& [id, copies] : result.copies) EXPECT_EQ(copies, 1) << "event " << id;
    EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
    EXPECT_EQ(static_cast<std::int64_t>(expected),
              schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL"));
  }
};

// 1. A crash while the relay idles with everything published: it stays up, reports not-ready
//    while the database is gone, and publishes what is written after the restart, in order.
TEST_F(RelayPostgresOutage, CrashWhileIdleIsRiddenOutAndLaterRowsFlowInOrder) {
  settings_.admin_port = free_port();
  insert_rows({"a1", "a2", "a3"});
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(15s)) << relay.describe();
  ASSERT_TRUE(wait_for_port(settings_.admin_port, 5s)) << relay.describe();
  ASSERT_TRUE(eventually([&] { return readiness() == 200; }, 5s)) << relay.describe();

  postgres_->stop_immediate();
  // The pool sees its connections drop; the next stats round (200 ms, plus at most one 1 s
  // acquire wait) publishes that.
  ASSERT_TRUE(eventually([&] { return readiness() == 503; }, 10s)) << relay.describe();
  std::this_thread::sleep_for(3s);  // down for a while: claims fail, the relay backs off
  ASSERT_TRUE(relay.running()) << relay.describe();
  EXPECT_EQ(readiness(), 503) << "still not ready while Postgres is down";
  EXPECT_EQ(send(settings_.admin_port, HttpRequest::get("/healthz"), kProbeTimeout).status, 200)
      << "liveness does not depend on Postgres: restarting the relay would not help";
  EXPECT_TRUE(log_has(relay, "\"event\":\"backing_off\"")) << relay.describe();
  EXPECT_TRUE(log_has(relay, "claim failed")) << relay.describe();

  postgres_->start();
  insert_rows({"a1", "a2", "a3", "a4"});  // old aggregates continue, a new one starts
  ASSERT_TRUE(drained(30s)) << relay.describe();
  EXPECT_TRUE(eventually([&] { return readiness() == 200; }, 10s)) << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();

  expect_each_event_once_in_order(7 * kRowsPerAggregate);
  const std::string log = relay.stderr_text();
  EXPECT_NE(log.find("\"event\":\"relay_recovered\""), std::string::npos) << log;
  EXPECT_EQ(stopped_field(log, "published"), 7 * kRowsPerAggregate);
  EXPECT_EQ(stopped_field(log, "duplicates"), 0) << "nothing was in flight when Postgres went away";
  EXPECT_NE(log.find("\"event\":\"postgres\""), std::string::npos) << "the outage is in the log: " << log;
  expect_every_line_is_json(log);
}

// 2. Postgres goes away between the publish and the mark, and stays away past the batch's lease:
//    the mark fails, the relay gives the batch up, and after the restart re-claims it; the dedup
//    markers turn the re-publish into no new stream entries.
TEST_F(RelayPostgresOutage, CrashBetweenPublishAndMarkPastTheLeaseLeavesOneEntryPerEvent) {
  insert_rows({"p1", "p2", "p3"});
  settings_.batch_size = 100;
  settings_.concurrency = 1;  // one claim holds all 30 rows when the relay is stopped
  settings_.lease = "5s";     // time for a few settle retries before the relay gives the batch up
  FaultProxy redis("127.0.0.1", suite_redis_port());

  Process relay = start_stopped_after_first_publish(redis);
  ASSERT_TRUE(is_stopped(relay.pid())) << relay.describe();
  EXPECT_TRUE(first_batch_in_stream()) << "the batch reached the stream";
  EXPECT_EQ(unpublished(), 3 * kRowsPerAggregate) << "...but is not marked";

  postgres_->stop_immediate();
  ASSERT_TRUE(relay.signal(SIGCONT));
  // Every settle attempt fails until the lease is nearly over; then the relay lets the batch go.
  // (A warning, "applied":"unknown", when some attempt went out on a connection that then died;
  // an error, "applied":"no", when none did.)
  ASSERT_TRUE(eventually([&] { return log_has(relay, kBatchGivenUp); }, 15s)) << relay.describe();
  EXPECT_TRUE(log_has(relay, kSettleRetried)) << relay.describe();
  ASSERT_TRUE(relay.running()) << relay.describe();

  postgres_->start();
  insert_rows({"p1", "p2", "p3"});  // behind the re-claimed batch in each aggregate
  ASSERT_TRUE(drained(30s)) << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();

  expect_each_event_once_in_order(6 * kRowsPerAggregate);
  const std::string log = relay.stderr_text();
  EXPECT_EQ(stopped_field(log, "duplicates"), 3 * kRowsPerAggregate) << "the re-publish hit the dedup markers";
  EXPECT_EQ(stopped_field(log, "published"), 6 * kRowsPerAggregate);
  EXPECT_EQ(stopped_field(log, "lease_lost"), 0);
}

// 3. The same, but Postgres is back within the lease: a settle retry marks the batch, nothing is
//    re-claimed or re-published.
TEST_F(RelayPostgresOutage, CrashBetweenPublishAndMarkWithinTheLeaseIsSettledByARetry) {
  insert_rows({"r1", "r2", "r3"});
  settings_.batch_size = 100;
  settings_.concurrency = 1;
  settings_.lease = "60s";
  FaultProxy redis("127.0.0.1", suite_redis_port());

  Process relay = start_stopped_after_first_publish(redis);
  ASSERT_TRUE(is_stopped(relay.pid())) << relay.describe();
  EXPECT_TRUE(first_batch_in_stream());

  postgres_->stop_immediate();
  ASSERT_TRUE(relay.signal(SIGCONT));
  ASSERT_TRUE(eventually([&] { return log_has(relay, kSettleRetried); }, 10s)) << relay.describe();
  std::this_thread::sleep_for(2s);  // a few more failed attempts
  ASSERT_TRUE(relay.running()) << relay.describe();

  postgres_->start();
  // Well inside the 60 s lease: only the settle retry can have marked these rows.
  ASSERT_TRUE(drained(20s)) << relay.describe();
  EXPECT_FALSE(log_has(relay, kBatchGivenUp)) << relay.describe();
  insert_rows({"r1", "r2"});
  ASSERT_TRUE(drained(20s)) << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();

  expect_each_event_once_in_order(5 * kRowsPerAggregate);
  const std::string log = relay.stderr_text();
  EXPECT_EQ(stopped_field(log, "duplicates"), 0) << "the batch was marked, never re-published";
  EXPECT_EQ(stopped_field(log, "published"), 5 * kRowsPerAggregate);
}

}  // namespace
}  // namespace idem::test::relay
