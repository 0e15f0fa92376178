// Upstreams by name, routes that name one, match on Host, and set their own timeout and body limit;
// the timing model per route.
#include <gtest/gtest.h>

#include <string>

#include "config/config.hpp"
#include "config_test_support.hpp"
#include "core/exchange_timing.hpp"
#include "core/route_table.hpp"

namespace idem::config {
namespace {

using namespace std::chrono_literals;
using test::all_issues;
using test::load;

constexpr std::string_view kTwoUpstreams = R"yaml(
upstreams:
  - { name: api, url: "http://127.0.0.1:8080" }
  - { name: reports, url: "https://reports.internal:9443", timeout: 2m, max_connections: 8 }
store: { postgres: { dsn: x } }
defaults: { lease: 60s }
routes:
  - name: export
    match: { method: POST, path: /exports, host: "*.reports.example" }
    upstream: reports
    lease: 3m
    max_request_body: 2GiB
  - name: report
    match: { method: POST, path: /report }
    upstream: reports
    timeout: 10s
    stream_idle_timeout: 5m
  - name: orders
    match: { method: POST, path: /orders }
)yaml";

TEST(RoutedUpstreamsConfig, UpstreamsLoadInOrderAndRoutesNameThem) {
  const LoadResult result = load(kTwoUpstreams);
  ASSERT_TRUE(result.config) << all_issues(result);
  const Config& config = *result.config;
  ASSERT_EQ(config.upstreams.size(), 2u);
  EXPECT_EQ(config.upstreams[0].name, "api");
  EXPECT_EQ(config.upstreams[1].name, "reports");
  EXPECT_EQ(config.upstreams[1].host, "reports.internal");
  EXPECT_TRUE(config.upstreams[1].tls.enabled);
  EXPECT_EQ(config.upstreams[1].timeout, 2min);
  EXPECT_EQ(config.upstreams[1].max_connections, 8u);

  ASSERT_EQ(config.routes.size(), 3u);
  const core::RouteForwarding& exporting = config.routes[0].forwarding;
  EXPECT_EQ(exporting.upstream_index, 1u);
  EXPECT_FALSE(exporting.timeout);
  EXPECT_EQ(exporting.max_request_body, 2ULL * 1024 * 1024 * 1024);
  EXPECT_EQ(config.routes[0].match.host, "*.reports.example");
  const core::RouteForwarding& report = config.routes[1].forwarding;
  EXPECT_EQ(report.upstream_index, 1u);
  EXPECT_EQ(report.timeout, 10s);
  EXPECT_EQ(report.stream_idle_timeout, 5min);
  EXPECT_EQ(config.routes[2].forwarding.upstream_index, 0u) << "no upstream named: the first";

  // Each route's budget comes from its own upstream and timeout; the drain covers the longest.
  const auto export_budget =
      core::longest_exchange(exchange_timeouts(config.routes[0], config.upstreams, config.store.postgres));
  const auto report_budget =
      core::longest_exchange(exchange_timeouts(config.routes[1], config.upstreams, config.store.postgres));
  EXPECT_EQ(export_budget.terms.back().setting, "upstreams.reports.timeout");
  EXPECT_EQ(export_budget.terms.back().each, 2min);
  EXPECT_EQ(report_budget.terms.back().setting, "routes[report].timeout");
  EXPECT_EQ(report_budget.terms.back().each, 10s);
  EXPECT_EQ(config.drain_timeout, core::default_drain_timeout(export_budget));
  EXPECT_EQ(longest_upstream_timeout(config), 2min);
}

TEST(RoutedUpstreamsConfig, TheHostMatchIgnoresPortAndCase) {
  const LoadResult result = load(kTwoUpstreams);
  ASSERT_TRUE(result.config) << all_issues(result);
  const core::RouteTable table(result.config->routes);
  const core::Route* hit = table.match("POST", "/exports", "EU.Reports.Example:443");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->policy.name, "export");
  EXPECT_EQ(table.match("POST", "/exports", "reports.example"), nullptr) << "*. matches names under it only";
  EXPECT_EQ(table.match("POST", "/exports", ""), nullptr);
  EXPECT_NE(table.match("POST", "/orders", "anything"), nullptr);
}

TEST(RoutedUpstreamsConfig, TheSingleUpstreamFormStillLoadsAsTheDefault) {
  const LoadResult result = load(
      "upstream: { url: \"http://127.0.0.1:3000\", timeout: 7s }\n"
      "store: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(result.config) << all_issues(result);
  ASSERT_EQ(result.config->upstreams.size(), 1u);
  EXPECT_EQ(result.config->upstreams[0].name, "default");
  EXPECT_EQ(result.config->upstreams[0].timeout, 7s);
}

// Review findings, each a load that went wrong.
TEST(RoutedUpstreamsConfig, AUnixSocketAloneListensOnNoTcpPort) {
  const LoadResult alone = load("listen: \"unix:/run/idemproxy/proxy.sock\"\nstore: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(alone.config) << all_issues(alone);
  EXPECT_FALSE(alone.config->listen.tcp);
  EXPECT_EQ(alone.config->listen.unix_socket, "/run/idemproxy/proxy.sock");
  const LoadResult both = load("listen: [\"127.0.0.1:9000\", \"unix:/run/p.sock\"]\nstore: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(both.config) << all_issues(both);
  EXPECT_TRUE(both.config->listen.tcp);
  EXPECT_EQ(both.config->listen.port, 9000);
  const LoadResult tcp = load("store: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(tcp.config);
  EXPECT_TRUE(tcp.config->listen.tcp) << "no listen: the default host:port";
}

TEST(RoutedUpstreamsConfig, ASlowRouteWithoutKeysNeedsNoLease) {
  const LoadResult result = load(R"yaml(
upstreams:
  - { name: api, url: "http://127.0.0.1:8080" }
  - { name: admin, url: "http://127.0.0.1:9090", timeout: 2m }
store: { postgres: { dsn: x } }
routes:
  - name: uploads
    match: { path: /uploads/* }
    key: off
    upstream: admin
)yaml");
  EXPECT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(all_issues(result), "");
}

TEST(RoutedUpstreamsConfig, ARouteForOneHostDoesNotHideTheCatchAllAfterIt) {
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
routes:
  - name: eu-orders
    match: { method: POST, path: /orders, host: "eu.example.com." }
    scope: { headers: [X-Tenant-Id] }
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(all_issues(result), "") << "no 'never used' warning: other hosts reach the second route";
  EXPECT_EQ(result.config->routes[0].match.host, "eu.example.com") << "a trailing dot is the same name";
  const core::RouteTable table(result.config->routes);
  EXPECT_EQ(table.match("POST", "/orders", "eu.example.com.")->policy.name, "eu-orders");
  EXPECT_EQ(table.match("POST", "/orders", "EU.example.com:443")->policy.name, "eu-orders");
  EXPECT_EQ(table.match("POST", "/orders", "us.example.com")->policy.name, "orders");
}

// On a reload the file may list the upstreams in another order: a route's budget is its named
// upstream's, not the one at its index in the file.
TEST(RoutedUpstreamsConfig, ABudgetIsTheNamedUpstreamsWhateverTheOrder) {
  const LoadResult result = load(kTwoUpstreams);
  ASSERT_TRUE(result.config) << all_issues(result);
  std::vector<UpstreamConfig> reordered{result.config->upstreams[1], result.config->upstreams[0]};
  const auto budget =
      core::longest_exchange(exchange_timeouts(result.config->routes[0], reordered, result.config->store.postgres));
  EXPECT_EQ(budget.terms.back().setting, "upstreams.reports.timeout");
  EXPECT_EQ(budget.terms.back().each, 2min);
}

struct ErrorCase {
  const char* name;
  std::string yaml;
  std::string expected;
};
void PrintTo(const ErrorCase& error_case, std::ostream* out) { *out << error_case.name; }

const std::string kStore = "store: { postgres: { dsn: x } }\n";

class RoutedUpstreamsConfigErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RoutedUpstreamsConfigErrors, ReportedWhereTheyAre) {
  const LoadResult result = load(GetParam().yaml);
  EXPECT_FALSE(result.config);
  EXPECT_EQ(all_issues(result), GetParam().expected + "\n");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RoutedUpstreamsConfigErrors,
    ::testing::Values(
        ErrorCase{"both_forms",
                  kStore + "upstream: { url: \"http://a\" }\nupstreams:\n  - { name: b, url: \"http://b\" }\n",
                  "test.yaml:3:1: upstream and upstreams are both set: declare the one upstream with upstream:, or "
                  "every upstream (the first is the default) under upstreams:"},
        ErrorCase{"duplicate_name",
                  kStore + "upstreams:\n  - { name: a, url: \"http://a\" }\n  - { name: a, url: \"http://b\" }\n",
                  "test.yaml:4:13: duplicate upstream name \"a\" (first used at line 3)"},
        ErrorCase{"no_url", kStore + "upstreams:\n  - { name: a }\n",
                  "test.yaml:3:5: upstreams[0].url is required (e.g. url: http://127.0.0.1:3000)"},
        ErrorCase{"unknown_upstream",
                  kStore +
                      "upstreams:\n  - { name: api, url: \"http://a\" }\nroutes:\n  - name: r\n    match: { path: /r "
                      "}\n    key: off\n    upstream: apii\n",
                  "test.yaml:8:15: routes[0].upstream names no upstream: \"apii\" (declared: api)"},
        ErrorCase{"host_with_port",
                  kStore + "routes:\n  - name: r\n    match: { path: /r, host: \"a.example:80\" }\n    key: off\n",
                  "test.yaml:4:30: bad host \"a.example:80\" in routes[0].match.host: a host is matched without its "
                  "port: leave the port out"},
        ErrorCase{"route_timeout_past_lease",
                  kStore + "routes:\n  - name: slow\n    match: { path: /r }\n    scope: { headers: [X-Tenant-Id] }\n"
                           "    timeout: 3m\n",
                  "test.yaml:3:5: route \"slow\": lease (60s) must be at least the longest exchange plus a 1s margin "
                  "(187s = 2 × store.postgres.query_timeout 2s + store.postgres.acquire_timeout 1s + "
                  "upstream.connect_timeout 1s + routes[slow].timeout 180s + margin 1s): a lease that lapses while the "
                  "first request may still run lets a retry execute it again"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace idem::config
