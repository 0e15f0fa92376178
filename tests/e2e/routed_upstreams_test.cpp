// Routes own their upstream: one proxy in front of two upstream processes, routed by path and by
// Host, each route guarded on its own; per-route timeouts (a slow route's budget beside a fast
// route's short lease, --check naming both) and per-route body limits. Executions are counted by
// each upstream.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "support/eventually.hpp"
#include "support/proxy_launcher.hpp"
#include "support/temp_dir.hpp"

namespace idem::test::e2e {
namespace {

using namespace std::chrono_literals;

// Two upstreams: `api` (the harness's upstream) and `reports` (a second idem-test-upstream).
// reports: the /reports route by path, and /orders when the Host is reports.example.
constexpr char kTwoUpstreams[] = R"(
listen: 127.0.0.1:${PROXY_PORT}
workers: 2
admin: { listen: "127.0.0.1:0" }
upstreams:
  - { name: api, url: "http://127.0.0.1:${UPSTREAM_PORT}", connect_timeout: 1s, timeout: 5s }
  - { name: reports, url: "http://127.0.0.1:${REPORTS_PORT}", connect_timeout: 1s, timeout: 5s }
store: { postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
defaults: { ttl: 1h, lease: 10s }
routes:
  - name: orders-for-reports-host
    match: { method: POST, path: /orders, host: reports.example }
    upstream: reports
    scope: { headers: [X-Tenant-Id] }
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
  - name: reports
    match: { method: POST, path: /reports }
    upstream: reports
    scope: { headers: [X-Tenant-Id] }
  - name: uploads
    match: { path: /uploads/* }
    key: off
    upstream: reports
    max_request_body: 2GiB
limits: { max_request_body: 1MiB }
)";

class RoutedUpstreams : public ProxyTest {
 protected:
  void SetUp() override {
    reports_.emplace(start_test_upstream(reports_dir_.path(), 0, "reports-upstream"));
    ProxyTest::SetUp();
  }
  void TearDown() override {
    ProxyTest::TearDown();
    if (reports_) reports_->process.terminate(std::chrono::seconds(5));
  }
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = kTwoUpstreams;
    options.variables["REPORTS_PORT"] = std::to_string(reports_->port);
    return options;
  }
  std::uint16_t reports_port() const { return reports_->port; }

  HttpRequest order(std::string_view target, const std::string& key) const {
    return HttpRequest::post(std::string(target), R"({"sku":"a"})").with("Idempotency-Key", key).with("X-Tenant-Id", "t1");
  }

 private:
  TempDir reports_dir_{"idem-reports"};
  std::optional<TestUpstream> reports_;
};

// Each route reaches its own upstream, and its key is guarded there: executed once, replayed after.
TEST_F(RoutedUpstreams, EachRouteReachesItsUpstreamAndIsGuardedThere) {
  const std::string order_key = unique_key("order");
  const std::string report_key = unique_key("report");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const HttpResponse ordered = send(order("/orders", order_key));
    ASSERT_EQ(ordered.status, 200) << ordered.body << ordered.error;
    EXPECT_EQ(ordered.header("Idempotent-Replay").value_or(""), attempt == 0 ? "" : "true");
    const HttpResponse reported = send(order("/reports", report_key));
    ASSERT_EQ(reported.status, 200) << reported.body << reported.error;
    EXPECT_EQ(reported.header("Idempotent-Replay").value_or(""), attempt == 0 ? "" : "true");
  }
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), order_key), 1u);
  EXPECT_EQ(upstream_count_for_key(reports_port(), order_key), 0u);
  EXPECT_EQ(upstream_count_for_key(reports_port(), report_key), 1u);
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), report_key), 0u);
}

// The Host picks the route (port and case aside): the same path goes to the other upstream.
TEST_F(RoutedUpstreams, TheHostPicksTheRouteAndSoTheUpstream) {
  const std::string by_host = unique_key("by-host");
  const std::string by_path = unique_key("by-path");
  const HttpResponse routed = send(order("/orders", by_host).with("Host", "Reports.Example:8443"));
  ASSERT_EQ(routed.status, 200) << routed.body << routed.error;
  const HttpResponse replayed = send(order("/orders", by_host).with("Host", "reports.example"));
  EXPECT_TRUE(is_replay(replayed)) << replayed.body;
  const HttpResponse other = send(order("/orders", by_path).with("Host", "api.example"));
  ASSERT_EQ(other.status, 200) << other.body << other.error;
  EXPECT_EQ(upstream_count_for_key(reports_port(), by_host), 1u);
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), by_host), 0u);
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), by_path), 1u);
}

// A route's body limit replaces limits.max_request_body for that route only: 3 MiB passes to the
// upload route (2 GiB) and is refused (413, not executed) on /orders (1 MiB); a Content-Length past
// 2 GiB is refused on the upload route before a byte of it is sent.
TEST_F(RoutedUpstreams, ABodyLimitPerRoute) {
  const std::string body(3 * 1024 * 1024, 'x');
  const std::uint64_t reports_before = test::upstream_total(reports_port());
  const HttpResponse uploaded = send(HttpRequest::post("/uploads/big", body, "application/octet-stream"));
  ASSERT_EQ(uploaded.status, 200) << uploaded.body << uploaded.error;
  EXPECT_EQ(test::upstream_total(reports_port()), reports_before + 1);

  const std::string key = unique_key("too-big");
  HttpRequest too_big = order("/orders", key);
  too_big.body = body;
  const HttpResponse refused = send(too_big);
  EXPECT_EQ(refused.status, 413) << refused.body;
  EXPECT_NE(refused.body.find("1048576-byte limit"), std::string::npos) << refused.body;
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), key), 0u);

  HttpRequest announced = HttpRequest::post("/uploads/huge", "", "application/octet-stream");
  announced.headers.emplace_back("Content-Length", std::to_string(3ULL * 1024 * 1024 * 1024));
  const HttpResponse past_route = send(announced);
  EXPECT_EQ(past_route.status, 413) << past_route.body;
  EXPECT_NE(past_route.body.find("2147483648-byte limit"), std::string::npos) << past_route.body;
  EXPECT_EQ(test::upstream_total(reports_port()), reports_before + 1);
}

// A slow route's timeout (3 minutes, its lease 4 minutes) beside a fast route: --check accepts it
// and prints both budgets, the drain that covers the slow one and the grace period; the fast
// route's lease stays 10 s, so a proxy killed (-9) mid-request on it frees its key once 10 s passed.
constexpr char kSlowAndFast[] = R"(
listen: 127.0.0.1:${PROXY_PORT}
workers: 2
admin: { listen: "127.0.0.1:0" }
upstream: { url: "http://127.0.0.1:${UPSTREAM_PORT}", connect_timeout: 1s, timeout: 5s }
store: { postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
defaults: { ttl: 1h, lease: 10s }
routes:
  - name: report
    match: { method: POST, path: /report }
    scope: { headers: [X-Tenant-Id] }
    timeout: 3m
    lease: 4m
  - name: fast
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
    unknown_outcome: retry
)";

class SlowRouteBesideFastRoute : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = kSlowAndFast;
    return options;
  }
};

TEST_F(SlowRouteBesideFastRoute, CheckComputesEachRoutesBudget) {
  const RunResult checked =
      run_idemproxy({"--config", proxy().config_path().string(), "--check"}, proxy().work_dir() / "check", "check", 30s);
  ASSERT_EQ(checked.exit_status, 0) << checked.stdout_text << checked.stderr_text;
  const std::string& out = checked.stdout_text;
  EXPECT_NE(out.find("route report: upstream default, lease 240s >= 184500ms = 2 × store.postgres.query_timeout 1s + "
                     "store.postgres.acquire_timeout 500ms + upstream.connect_timeout 1s + routes[report].timeout "
                     "180s + margin 1s"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("route fast: upstream default, lease 10s >= 9500ms = 2 × store.postgres.query_timeout 1s + "
                     "store.postgres.acquire_timeout 500ms + upstream.connect_timeout 1s + upstream.timeout 5s + "
                     "margin 1s"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("drain_timeout: 184500ms (the longest exchange 183500ms ="), std::string::npos) << out;
  EXPECT_NE(out.find("terminationGracePeriodSeconds: at least 370"), std::string::npos) << out;
}

TEST_F(SlowRouteBesideFastRoute, AKilledProxyFreesTheFastRoutesKeyAfterItsOwnLease) {
  const std::string key = unique_key("fast-kill");
  const HttpRequest request = HttpRequest::post("/orders", R"({"sku":"a"})")
                                  .with("Idempotency-Key", key)
                                  .with("X-Tenant-Id", "t1")
                                  .with("X-Test-Delay-Ms", "30000");
  // The first attempt reaches the upstream (counted there), then the proxy dies under it.
  std::thread first([&] { (void)send(request, 20s); });
  ASSERT_TRUE(eventually([&] { return upstream_count_for_key(proxy().upstream_port(), key) == 1; }, 5s));
  const auto killed_at = std::chrono::steady_clock::now();
  proxy().proxy_process()->kill9();  // no drain: the claim stays in flight
  ASSERT_TRUE(proxy().proxy_process()->wait_exit(5s)) << "its listening sockets must be gone before the restart";
  first.join();
  proxy().restart_proxy();

  HttpRequest retry = request;
  retry.headers.pop_back();  // no delay this time
  const HttpResponse early = send(retry);
  EXPECT_EQ(early.status, 409) << "within the fast route's lease: " << early.body << early.error;
  // Past the fast route's 10 s lease (not the slow route's 4 minutes) the retry runs.
  ASSERT_TRUE(eventually([&] { return send(retry).status == 200; }, 20s));
  const auto freed_after = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(freed_after, 25s);
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), key), 2u);
}

}  // namespace
}  // namespace idem::test::e2e
