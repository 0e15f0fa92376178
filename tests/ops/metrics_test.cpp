// /metrics: the exposition passes `promtool check metrics` (format and lint) after real traffic,
// and its counters say exactly what the traffic was.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"
#include "support/blocking_pg.hpp"
#include "support/eventually.hpp"
#include "support/process.hpp"

namespace idem::test::ops {
namespace {

using e2e::order;

constexpr std::chrono::seconds kPromtoolTimeout{30};

// `promtool check metrics` reads the exposition on stdin; the shell pipes the saved scrape into it.
RunResult promtool_check(const std::filesystem::path& exposition_file, const std::filesystem::path& log_dir) {
  return run_to_exit(
      ProcessSpec{"/bin/sh",
                  {"-c", "exec \"$0\" check metrics < \"$1\"", promtool_binary(), exposition_file.string()},
                  {},
                  log_dir,
                  "promtool"},
      kPromtoolTimeout);
}

std::string series(std::string_view route, std::string_view decision) {
  return "idemproxy_requests_total{route=\"" + std::string(route) + "\",decision=\"" + std::string(decision) + "\"}";
}

class OpsMetrics : public ProxyTest {};

TEST_F(OpsMetrics, ScrapePassesPromtoolAndCountsTheTraffic) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  const HttpResponse before = admin_get(admin, "/metrics");
  ASSERT_EQ(before.status, 200) << describe(before);
  const double claims_before =
      metric_value(before.body, "idemproxy_store_duration_seconds_count{operation=\"claim\"}").value_or(0);

  // 3 new keys, 2 replays, 1 fingerprint mismatch, 1 missing key, 1 request no route matches.
  const std::vector<std::string> keys{unique_key("metrics-a"), unique_key("metrics-b"), unique_key("metrics-c")};
  for (const auto& key : keys) ASSERT_EQ(send(order(key)).status, 200) << key;
  for (int i = 0; i < 2; ++i) {
    const HttpResponse replay = send(order(keys[static_cast<std::size_t>(i)]));
    ASSERT_EQ(replay.status, 200) << describe(replay);
    ASSERT_TRUE(e2e::is_replay(replay)) << describe(replay);
  }
  ASSERT_EQ(send(order(keys[2], R"({"item":"pen","quantity":2})")).status, 422);
  ASSERT_EQ(send(HttpRequest::post("/orders", std::string(e2e::kOrderBody)).with("X-Tenant-Id", "t1")).status, 400);
  ASSERT_EQ(send(HttpRequest::get("/status")).status, 200);

  const HttpResponse scrape = admin_get(admin, "/metrics");
  ASSERT_EQ(scrape.status, 200) << describe(scrape);
  EXPECT_EQ(scrape.header("Content-Type").value_or("").rfind("text/plain; version=0.0.4", 0), 0u) << describe(scrape);
  const std::string& text = scrape.body;

  EXPECT_EQ(metric_value(text, series("orders", "new")), 3.0) << text;
  EXPECT_EQ(metric_value(text, series("orders", "replay")), 2.0) << text;
  EXPECT_EQ(metric_value(text, series("orders", "mismatch_422")), 1.0) << text;
  EXPECT_EQ(metric_value(text, series("orders", "missing_key_400")), 1.0) << text;
  EXPECT_EQ(metric_value(text, series("-", "passthrough")), 1.0) << text;
  EXPECT_EQ(metric_value(text, "idemproxy_responses_total{class=\"2xx\"}"), 6.0) << text;
  EXPECT_EQ(metric_value(text, "idemproxy_responses_total{class=\"4xx\"}"), 2.0) << text;
  // Only the three new keys reached the upstream on the orders route.
  EXPECT_EQ(metric_value(text, "idemproxy_upstream_duration_seconds_count{route=\"orders\"}"), 3.0) << text;
  EXPECT_EQ(metric_value(text, "idemproxy_upstream_duration_seconds_bucket{route=\"orders\",le=\"+Inf\"}"), 3.0)
      << text;
  EXPECT_GE(metric_value(text, "idemproxy_store_duration_seconds_count{operation=\"claim\"}").value_or(0),
            claims_before + 3)
      << text;
  EXPECT_EQ(metric_value(text, "idemproxy_store_duration_seconds_count{operation=\"complete\"}"), 3.0) << text;
  // Every orders request read whole counts once by the class of its answer: 3 new and 2 replays
  // (2xx), the 422 and the 400 (4xx); the SLO rules divide these.
  EXPECT_EQ(metric_value(text, "idemproxy_request_duration_seconds_count{route=\"orders\",class=\"2xx\"}"), 5.0)
      << text;
  EXPECT_EQ(metric_value(text, "idemproxy_request_duration_seconds_count{route=\"orders\",class=\"4xx\"}"), 2.0)
      << text;
  EXPECT_EQ(metric_value(text, "idemproxy_request_duration_seconds_count{route=\"-\",class=\"2xx\"}"), 1.0) << text;
  EXPECT_EQ(metric_value(text, "idemproxy_added_latency_seconds_count{route=\"orders\"}"), 7.0) << text;
  // Both replays come from this process's cache (the same proxy executed them a moment before).
  EXPECT_EQ(metric_value(text, "idemproxy_replays_total{route=\"orders\",source=\"local\"}"), 2.0) << text;
  EXPECT_FALSE(metric_value(text, "idemproxy_replays_total{route=\"orders\",source=\"postgres\"}").has_value()) << text;
  // The proxy's share is the whole minus the upstream exchange, request by request: summed over
  // the route, added + upstream = whole (to the microsecond each request is measured in).
  const double whole =
      metric_value(text, "idemproxy_request_duration_seconds_sum{route=\"orders\",class=\"2xx\"}").value_or(0) +
      metric_value(text, "idemproxy_request_duration_seconds_sum{route=\"orders\",class=\"4xx\"}").value_or(0);
  const double added = metric_value(text, "idemproxy_added_latency_seconds_sum{route=\"orders\"}").value_or(-1);
  const double upstream = metric_value(text, "idemproxy_upstream_duration_seconds_sum{route=\"orders\"}").value_or(0);
  EXPECT_GT(upstream, 0.0) << text;
  EXPECT_GT(added, 0.0) << text;
  EXPECT_NEAR(added + upstream, whole, 1e-5) << text;
  EXPECT_GT(metric_value(text, "idemproxy_replay_cache_hits_total").value_or(0), 0.0) << text;
  EXPECT_GT(metric_value(text, "idemproxy_replay_cache_bytes").value_or(0), 0.0) << text;
  EXPECT_GT(metric_value(text, "idemproxy_pg_statements_total").value_or(0), 0.0) << text;
  EXPECT_EQ(metric_value(text, "idemproxy_in_flight_records"), 0.0) << text;
  EXPECT_EQ(metric_value(text, "idemproxy_draining"), 0.0) << text;
  EXPECT_EQ(metric_value(text, "idemproxy_pg_pool_size"), 4.0) << text;  // the fixture's pool_size

  // Every family the README documents is exposed, with its documented type.
  const std::vector<std::pair<std::string, std::string>> families{
      {"idemproxy_requests_total", "counter"},
      {"idemproxy_responses_total", "counter"},
      {"idemproxy_upstream_duration_seconds", "histogram"},
      {"idemproxy_request_duration_seconds", "histogram"},
      {"idemproxy_added_latency_seconds", "histogram"},
      {"idemproxy_replays_total", "counter"},
      {"idemproxy_store_duration_seconds", "histogram"},
      {"idemproxy_in_flight_records", "gauge"},
      {"idemproxy_waiting_duplicates", "gauge"},
      {"idemproxy_client_connections", "gauge"},
      {"idemproxy_replay_cache_hits_total", "counter"},
      {"idemproxy_replay_cache_misses_total", "counter"},
      {"idemproxy_replay_cache_bytes", "gauge"},
      {"idemproxy_pg_pool_size", "gauge"},
      {"idemproxy_pg_pool_waits_total", "counter"},
      {"idemproxy_pg_pool_wait_timeouts_total", "counter"},
      {"idemproxy_pg_statements_total", "counter"},
      {"idemproxy_pg_connects_failed_total", "counter"},
      {"idemproxy_pg_query_timeouts_total", "counter"},
      {"idemproxy_reaper_deleted_total", "counter"},
      {"idemproxy_reaper_failures_total", "counter"},
      {"idemproxy_draining", "gauge"},
  };
  for (const auto& [family, type] : families) EXPECT_EQ(metric_type(text, family), type) << family;

  // promtool: a format error fails with a non-zero status, a lint problem (naming, missing HELP,
  // counters without _total, ...) is printed. Either fails the test.
  const auto file = proxy().work_dir() / "metrics.prom";
  write_file(file, text);
  const RunResult checked = promtool_check(file, proxy().work_dir());
  ASSERT_TRUE(checked.exit_status.has_value()) << "promtool did not finish";
  EXPECT_EQ(*checked.exit_status, 0) << checked.stdout_text << checked.stderr_text;
  EXPECT_EQ(checked.stdout_text + checked.stderr_text, "") << "promtool check metrics reported problems";
}

// idemproxy_pg_pool_waits_total counts statements that had to queue for a busy pool, so
// sequential traffic on an idle, connected pool adds none, while every statement still counts in
// idemproxy_pg_statements_total.
TEST_F(OpsMetrics, PoolWaitsCountOnlyStatementsThatQueued) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  ASSERT_EQ(send(order(unique_key("pool-warm-up"))).status, 200);  // every worker's pool is connected
  const std::string before = admin_get(admin, "/metrics").body;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(send(order(unique_key("pool-sequential"))).status, 200);
  const std::string after = admin_get(admin, "/metrics").body;
  const double statements = metric_value(after, "idemproxy_pg_statements_total").value_or(0) -
                            metric_value(before, "idemproxy_pg_statements_total").value_or(0);
  const double waits = metric_value(after, "idemproxy_pg_pool_waits_total").value_or(0) -
                       metric_value(before, "idemproxy_pg_pool_waits_total").value_or(0);
  EXPECT_GE(statements, 10.0) << after;  // a claim and a completion per request
  EXPECT_EQ(waits, 0.0) << "one request at a time on a pool of 2 connections per worker never queues\n" << after;
}

// Bucket bounds are label values: written in the shortest form that reads back as the same
// number (as Prometheus client libraries write them), so selectors like le="0.1" match.
TEST_F(OpsMetrics, BucketBoundsAreWrittenInShortestForm) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  ASSERT_EQ(send(order(unique_key("buckets"))).status, 200);
  const std::string text = admin_get(admin, "/metrics").body;
  for (const char* bound : {"0.00025", "0.1", "0.25", "1", "+Inf"}) {
    const std::string bucket =
        "idemproxy_upstream_duration_seconds_bucket{route=\"orders\",le=\"" + std::string(bound) + "\"}";
    EXPECT_TRUE(metric_value(text, bucket).has_value()) << bucket << " missing in:\n" << text;
  }
}

// The reaper's deletions are counted: on a database of its own (the one record this test writes
// is the only one to expire), the record past its ttl is deleted, counted once, and the key is free
// again. The lease is the timing model's shortest with the fixture's timeouts and a 500 ms upstream
// timeout (2 × query 1 s + acquire 500 ms + connect 1 s + upstream 500 ms + margin 1 s = 5 s); the
// ttl has to exceed it.
class OpsReaperMetrics : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    const std::string defaults = "defaults: { ttl: 1h, lease: 10s }";
    std::string text(default_config_template());
    text.replace(text.find(defaults), defaults.size(), "defaults: { ttl: 5500ms, lease: 5s }");
    ProxyOptions options;
    options.config_template = text + "reaper: { interval: 250ms, batch: 100 }\n";
    options.variables["UPSTREAM_TIMEOUT"] = "500ms";
    options.variables["PG_DSN"] = yaml_quoted(database_.dsn());
    return options;
  }
  ScratchDatabase database_;
};

TEST_F(OpsReaperMetrics, ExpiredRecordsAreDeletedAndCounted) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  const std::string key = unique_key("reaped");
  ASSERT_EQ(send(order(key)).status, 200);
  EXPECT_EQ(metric_value(admin_get(admin, "/metrics").body, "idemproxy_reaper_deleted_total"), 0.0);
  EXPECT_TRUE(eventually(
      [&] { return metric_value(admin_get(admin, "/metrics").body, "idemproxy_reaper_deleted_total") == 1.0; },
      std::chrono::seconds(10)))
      << "the expired record was not deleted\n"
      << proxy().diagnostics();
  const auto deletions = events(proxy().proxy_process()->stderr_text(), "reaper_deleted");
  ASSERT_EQ(deletions.size(), 1u) << proxy().proxy_process()->stderr_text();
  EXPECT_EQ(int_field(deletions[0], "records"), 1);
  const HttpResponse again = send(order(key));
  EXPECT_EQ(again.status, 200) << describe(again);
  EXPECT_FALSE(e2e::is_replay(again)) << "an expired key must execute again";
  EXPECT_EQ(upstream_count(key), 2u);
}

// A sweep the store refuses is counted (the alert on a reaper that stops deleting reads it) and
// logged; the reaper keeps going.
TEST_F(OpsReaperMetrics, RefusedSweepsAreCountedAndLogged) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  EXPECT_EQ(metric_value(admin_get(admin, "/metrics").body, "idemproxy_reaper_failures_total"), 0.0);
  BlockingPg(database_.dsn()).execute("DROP TABLE idempotency_records");
  EXPECT_TRUE(eventually(
      [&] { return metric_value(admin_get(admin, "/metrics").body, "idemproxy_reaper_failures_total") >= 2.0; },
      std::chrono::seconds(10)))
      << "the refused sweeps were not counted\n"
      << proxy().diagnostics();
  EXPECT_FALSE(events(proxy().proxy_process()->stderr_text(), "reaper_failed").empty())
      << proxy().proxy_process()->stderr_text();
}

// The check above is only as good as the pipeline: a lint problem and a syntax error fed through
// the same command must show up.
TEST(OpsPromtool, PipelineReportsLintProblemsAndSyntaxErrors) {
  TempDir dir("idem-promtool");
  const auto lint_file = dir.path() / "lint.prom";
  write_file(lint_file,
             "# HELP idemproxy_bad A counter without the _total suffix.\n"
             "# TYPE idemproxy_bad counter\nidemproxy_bad 1\n");
  const RunResult lint = promtool_check(lint_file, dir.path());
  ASSERT_TRUE(lint.exit_status.has_value());
  EXPECT_NE(lint.stdout_text + lint.stderr_text, "") << "promtool printed nothing for a counter without _total";

  const auto broken_file = dir.path() / "broken.prom";
  write_file(broken_file, "idemproxy_broken{route=\"x\" 1\n");
  const RunResult broken = promtool_check(broken_file, dir.path());
  ASSERT_TRUE(broken.exit_status.has_value());
  EXPECT_NE(*broken.exit_status, 0) << broken.stdout_text << broken.stderr_text;
}

}  // namespace
}  // namespace idem::test::ops
