// Loading valid configs: every field as given, defaults, route merging, ${VAR} expansion, warnings,
// and the shipped example file.
#include "config/config_loader.hpp"
#include "core/key_format.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "config_test_support.hpp"

namespace idem::config {
namespace {

using namespace std::chrono_literals;
using test::all_issues;
using test::fake_env;
using test::load;

using Strings = std::vector<std::string>;

constexpr std::string_view kFullConfig = R"yaml(
listen: 0.0.0.0:9090
workers: 6
drain_timeout: 50s
limits:
  max_request_body: 5MiB
  max_header_bytes: 32KiB
  max_request_line: 4KiB
  header_timeout: 5s
  body_timeout: 1m
  idle_timeout: 2m
  write_timeout: 15s
upstream:
  url: http://orders.internal:8081/
  connect_timeout: 500ms
  timeout: 45s
  max_connections: 64
  idle_timeout: 10s
store:
  postgres:
    dsn: "host=db user=idem"
    pool_size: 16
    connect_timeout: 3s
    query_timeout: 1500ms
    acquire_timeout: 250ms
defaults:
  key_header: X-Request-Key
  key: optional
  max_key_length: 128
  ttl: 48h
  lease: 2m
  max_stored_body: 256KiB
  scope: { headers: [Authorization] }
  fingerprint: { headers: [Content-Type, Accept], ignore_json: [/nonce] }
  release_statuses: [503]
  store_set_cookie: true
  unknown_outcome: retry
  store_unavailable: fail_open
  in_flight: wait
  wait_timeout: 2.5s
routes:
  - name: create-order
    match: { method: POST, path: /orders }
    scope: { headers: [Authorization, X-Tenant-Id] }
    fingerprint: { ignore_json: [/client_timestamp, /meta/trace~1id] }
    release_statuses: [408, 425, 429, 503]
  - name: webhooks
    match: { method: [POST, PUT], path: /webhooks/* }
    key_header: webhook-id
    key: required
    max_key_length: 64
    ttl: 7d
    lease: 90s
    max_stored_body: 2MiB
    store_set_cookie: false
    unknown_outcome: lock
    store_unavailable: fail_closed
    in_flight: reject
    wait_timeout: 1s
  - name: refunds
    match: { path: "/orders/{id}/refunds" }
    key: "off"
)yaml";

TEST(ConfigLoad, FullConfigLoadsEveryFieldAsGiven) {
  const LoadResult result = load(kFullConfig);
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_TRUE(result.issues.empty()) << all_issues(result);
  const Config& config = *result.config;

  EXPECT_EQ(config.source_path, "");
  EXPECT_EQ(config.listen.host, "0.0.0.0");
  EXPECT_EQ(config.listen.port, 9090);
  EXPECT_EQ(config.workers, 6u);
  EXPECT_EQ(config.drain_timeout, 50s);

  EXPECT_EQ(config.limits.max_request_body, 5u * 1024 * 1024);
  EXPECT_EQ(config.limits.max_header_bytes, 32u * 1024);
  EXPECT_EQ(config.limits.max_request_line, 4u * 1024);
  EXPECT_EQ(config.limits.header_timeout, 5s);
  EXPECT_EQ(config.limits.body_timeout, 1min);
  EXPECT_EQ(config.limits.idle_timeout, 2min);
  EXPECT_EQ(config.limits.write_timeout, 15s);

  EXPECT_EQ(config.upstreams[0].url, "http://orders.internal:8081/");
  EXPECT_EQ(config.upstreams[0].host, "orders.internal");
  EXPECT_EQ(config.upstreams[0].port, 8081);
  EXPECT_EQ(config.upstreams[0].connect_timeout, 500ms);
  EXPECT_EQ(config.upstreams[0].timeout, 45s);
  EXPECT_EQ(config.upstreams[0].max_connections, 64u);
  EXPECT_EQ(config.upstreams[0].idle_timeout, 10s);

  EXPECT_EQ(config.store.postgres.dsn, "host=db user=idem");
  EXPECT_EQ(config.store.postgres.pool_size, 16u);
  EXPECT_EQ(config.store.postgres.connect_timeout, 3s);
  EXPECT_EQ(config.store.postgres.query_timeout, 1500ms);
  EXPECT_EQ(config.store.postgres.acquire_timeout, 250ms);

  ASSERT_EQ(config.routes.size(), 3u);

  // Route 0 overrides scope, fingerprint.ignore_json and release_statuses; the rest is defaults.
  const core::Route& orders = config.routes[0];
  EXPECT_EQ(orders.match.methods, Strings{"POST"});
  EXPECT_EQ(orders.match.path, "/orders");
  EXPECT_EQ(orders.policy.name, "create-order");
  EXPECT_EQ(orders.policy.key, core::KeyRequirement::optional);
  EXPECT_EQ(orders.policy.key_header, "X-Request-Key");
  EXPECT_EQ(orders.policy.max_key_length, 128u);
  EXPECT_EQ(orders.policy.scope_headers, (Strings{"Authorization", "X-Tenant-Id"}));
  EXPECT_EQ(orders.policy.fingerprint_headers, (Strings{"Content-Type", "Accept"}));  // from defaults
  EXPECT_EQ(orders.policy.ignore_json, (Strings{"/client_timestamp", "/meta/trace~1id"}));
  EXPECT_EQ(orders.policy.release_statuses, (std::vector<int>{408, 425, 429, 503}));
  EXPECT_EQ(orders.policy.ttl, 48h);
  EXPECT_EQ(orders.policy.lease, 2min);
  EXPECT_EQ(orders.policy.max_stored_body, 256u * 1024);
  EXPECT_TRUE(orders.policy.store_set_cookie);
  EXPECT_EQ(orders.policy.unknown_outcome, core::UnknownOutcome::retry);
  EXPECT_EQ(orders.policy.store_unavailable, core::StoreUnavailable::fail_open);
  EXPECT_EQ(orders.policy.in_flight, core::InFlightPolicy::wait);
  EXPECT_EQ(orders.policy.wait_timeout, 2500ms);

  // Route 1 overrides every scalar policy option.
  const core::Route& webhooks = config.routes[1];
  EXPECT_EQ(webhooks.match.methods, (Strings{"POST", "PUT"}));
  EXPECT_EQ(webhooks.match.path, "/webhooks/*");
  EXPECT_EQ(webhooks.policy.name, "webhooks");
  EXPECT_EQ(webhooks.policy.key_header, "webhook-id");  // the user's spelling is kept
  EXPECT_EQ(webhooks.policy.key, core::KeyRequirement::required);
  EXPECT_EQ(webhooks.policy.max_key_length, 64u);
  EXPECT_EQ(webhooks.policy.scope_headers, Strings{"Authorization"});  // from defaults
  EXPECT_EQ(webhooks.policy.ignore_json, Strings{"/nonce"});           // from defaults
  EXPECT_EQ(webhooks.policy.release_statuses, std::vector<int>{503});  // from defaults
  EXPECT_EQ(webhooks.policy.ttl, 7 * 24h);
  EXPECT_EQ(webhooks.policy.lease, 90s);
  EXPECT_EQ(webhooks.policy.max_stored_body, 2u * 1024 * 1024);
  EXPECT_FALSE(webhooks.policy.store_set_cookie);
  EXPECT_EQ(webhooks.policy.unknown_outcome, core::UnknownOutcome::lock);
  EXPECT_EQ(webhooks.policy.store_unavailable, core::StoreUnavailable::fail_closed);
  EXPECT_EQ(webhooks.policy.in_flight, core::InFlightPolicy::reject);
  EXPECT_EQ(webhooks.policy.wait_timeout, 1s);

  const core::Route& refunds = config.routes[2];
  EXPECT_TRUE(refunds.match.methods.empty());  // omitted: any method
  EXPECT_EQ(refunds.match.path, "/orders/{id}/refunds");
  EXPECT_EQ(refunds.policy.key, core::KeyRequirement::off);
}

TEST(ConfigLoad, DefaultsApplyWhenOptionsAreOmitted) {
  const LoadResult result = load(R"yaml(
store:
  postgres:
    dsn: postgresql:///idem
routes:
  - name: orders
    match: { path: /orders }
    scope: { headers: [Authorization] }
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_TRUE(result.issues.empty()) << all_issues(result);
  const Config& config = *result.config;

  EXPECT_EQ(config.listen.host, "127.0.0.1");
  EXPECT_EQ(config.listen.port, 8080);
  EXPECT_EQ(config.workers, 0u);
  EXPECT_EQ(config.drain_timeout, 37s);  // the timing model's longest exchange + 1s
  EXPECT_EQ(config.limits.max_request_body, 10u * 1024 * 1024);
  EXPECT_EQ(config.limits.max_header_bytes, 16u * 1024);
  EXPECT_EQ(config.limits.max_request_line, 8u * 1024);
  EXPECT_EQ(config.limits.header_timeout, 10s);
  EXPECT_EQ(config.limits.body_timeout, 30s);
  EXPECT_EQ(config.limits.idle_timeout, 60s);
  EXPECT_EQ(config.limits.write_timeout, 30s);
  EXPECT_EQ(config.upstreams[0].url, "http://127.0.0.1:3000");
  EXPECT_EQ(config.upstreams[0].host, "127.0.0.1");
  EXPECT_EQ(config.upstreams[0].port, 3000);
  EXPECT_EQ(config.upstreams[0].connect_timeout, 1s);
  EXPECT_EQ(config.upstreams[0].timeout, 30s);
  EXPECT_EQ(config.upstreams[0].max_connections, 256u);
  EXPECT_EQ(config.upstreams[0].idle_timeout, 4s);
  EXPECT_EQ(config.store.postgres.dsn, "postgresql:///idem");
  EXPECT_EQ(config.store.postgres.pool_size, 8u);
  EXPECT_EQ(config.store.postgres.connect_timeout, 2s);
  EXPECT_EQ(config.store.postgres.query_timeout, 2s);
  EXPECT_EQ(config.store.postgres.acquire_timeout, 1s);

  ASSERT_EQ(config.routes.size(), 1u);
  const core::RoutePolicy& policy = config.routes[0].policy;
  EXPECT_EQ(policy.name, "orders");
  EXPECT_EQ(policy.key, core::KeyRequirement::required);
  EXPECT_EQ(policy.key_header, "Idempotency-Key");
  EXPECT_EQ(policy.max_key_length, 255u);
  EXPECT_EQ(policy.fingerprint_headers, Strings{"Content-Type"});
  EXPECT_TRUE(policy.ignore_json.empty());
  EXPECT_EQ(policy.release_statuses, (std::vector<int>{408, 425, 429, 503}));
  EXPECT_EQ(policy.ttl, 24h);
  EXPECT_EQ(policy.lease, 60s);
  EXPECT_EQ(policy.max_stored_body, 1024u * 1024);
  EXPECT_FALSE(policy.store_set_cookie);
  EXPECT_EQ(policy.unknown_outcome, core::UnknownOutcome::lock);
  EXPECT_EQ(policy.store_unavailable, core::StoreUnavailable::fail_closed);
  EXPECT_EQ(policy.in_flight, core::InFlightPolicy::reject);
  EXPECT_EQ(policy.wait_timeout, 5s);
}

TEST(ConfigLoad, EmptySectionsAndNoRoutesAreAccepted) {
  // A section whose entries are all commented out is null in YAML: it means "all defaults".
  const LoadResult result = load("limits:\nupstream:\nstore:\n  postgres:\n    dsn: x\ndefaults:\nroutes:\n");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_TRUE(result.config->routes.empty());
  EXPECT_EQ(result.config->limits.max_request_body, 10u * 1024 * 1024);
}

TEST(ConfigLoad, Ipv6ListenAndUpstreamWithoutPort) {
  const LoadResult result = load(R"yaml(
listen: "[::1]:8443"
upstream: { url: "http://[fd00::5]" }
store: { postgres: { dsn: x } }
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->listen.host, "::1");
  EXPECT_EQ(result.config->listen.port, 8443);
  EXPECT_EQ(result.config->upstreams[0].host, "fd00::5");
  EXPECT_EQ(result.config->upstreams[0].port, 80);
}

TEST(ConfigLoad, UpstreamHostWithoutPortDefaultsTo80) {
  const LoadResult result = load("upstream: { url: http://backend }\nstore: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->upstreams[0].host, "backend");
  EXPECT_EQ(result.config->upstreams[0].port, 80);
}

TEST(ConfigLoad, TlsRedisAndPreparedStatementOptions) {
  // TLS file paths must be readable at load time; any readable file will do for the loader.
  const std::string file = "/proc/self/cmdline";
  const LoadResult result = load(R"yaml(
listen: 0.0.0.0:8443
tls: { cert_file: )yaml" + file +
                                 ", key_file: " + file + R"yaml(, min_version: "1.3" }
upstream:
  url: https://payments.internal
  tls:
    verify: false
    ca_file: )yaml" + file + R"yaml(
    server_name: api.payments.example
    cert_file: )yaml" + file + R"yaml(
    key_file: )yaml" + file + R"yaml(
store:
  postgres: { dsn: x, prepared_statements: false }
  redis:
    address: 10.0.0.7:6380
    password: secret
    database: 2
    connect_timeout: 250ms
    timeout: 3ms
    key_prefix: "orders:"
    max_value_bytes: 256KiB
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_TRUE(result.issues.empty()) << all_issues(result);
  const Config& config = *result.config;
  EXPECT_TRUE(config.tls.enabled());
  EXPECT_EQ(config.tls.cert_file, file);
  EXPECT_EQ(config.tls.key_file, file);
  EXPECT_EQ(config.tls.min_version, TlsVersion::v1_3);
  EXPECT_EQ(config.upstreams[0].host, "payments.internal");
  EXPECT_EQ(config.upstreams[0].port, 443);
  EXPECT_TRUE(config.upstreams[0].tls.enabled);
  EXPECT_FALSE(config.upstreams[0].tls.verify);
  EXPECT_EQ(config.upstreams[0].tls.ca_file, file);
  EXPECT_EQ(config.upstreams[0].tls.server_name, "api.payments.example");
  EXPECT_EQ(config.upstreams[0].tls.cert_file, file);
  EXPECT_EQ(config.upstreams[0].tls.key_file, file);
  EXPECT_FALSE(config.store.postgres.prepared_statements);
  EXPECT_TRUE(config.store.redis.enabled());
  EXPECT_EQ(config.store.redis.host, "10.0.0.7");
  EXPECT_EQ(config.store.redis.port, 6380);
  EXPECT_EQ(config.store.redis.password, "secret");
  EXPECT_EQ(config.store.redis.database, 2u);
  EXPECT_EQ(config.store.redis.connect_timeout, 250ms);
  EXPECT_EQ(config.store.redis.timeout, 3ms);
  EXPECT_EQ(config.store.redis.key_prefix, "orders:");
  EXPECT_EQ(config.store.redis.max_value_bytes, 256u * 1024);
}

TEST(ConfigLoad, TlsAndRedisAreOffByDefaultAndHttpsDefaultsToPort443) {
  const LoadResult plain = load("store: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(plain.config) << all_issues(plain);
  EXPECT_FALSE(plain.config->tls.enabled());
  EXPECT_FALSE(plain.config->upstreams[0].tls.enabled);
  EXPECT_TRUE(plain.config->upstreams[0].tls.verify);
  EXPECT_FALSE(plain.config->store.redis.enabled());
  EXPECT_TRUE(plain.config->store.postgres.prepared_statements);

  const LoadResult https = load("upstream: { url: \"https://[fd00::5]\" }\nstore: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(https.config) << all_issues(https);
  EXPECT_TRUE(https.config->upstreams[0].tls.enabled);
  EXPECT_EQ(https.config->upstreams[0].port, 443);
}

TEST(ConfigWarnings, UpstreamTlsOptionsWithPlainHttpUrlWarn) {
  const LoadResult result =
      load("upstream:\n  url: http://backend:8080\n  tls: { verify: false }\nstore: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(result.config) << all_issues(result);
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:3:3: warning: upstream.tls is ignored: upstream.url is not https://");
}

// Answers are streamed past what a route keeps (README "Streaming"): the old bound on a whole
// answer still loads, with a warning that it does nothing.
TEST(ConfigWarnings, MaxResponseBodyIsNoLongerUsedAndWarns) {
  const LoadResult result = load("limits:\n  max_response_body: 64MiB\nstore: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(result.config) << all_issues(result);
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_TRUE(result.issues[0].warning);
  EXPECT_EQ(result.issues[0].line, 2);
  EXPECT_NE(result.issues[0].message.find("limits.max_response_body is no longer used"), std::string::npos)
      << all_issues(result);
}

TEST(ConfigLoad, RepeatedMethodsAndStatusesAreKeptOnce) {
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
routes:
  - name: a
    match: { method: [POST, PATCH, POST], path: /a }
    scope: { headers: [Authorization] }
    release_statuses: [503, 429, 503]
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->routes[0].match.methods, (Strings{"POST", "PATCH"}));
  EXPECT_EQ(result.config->routes[0].policy.release_statuses, (std::vector<int>{503, 429}));
}

TEST(ConfigLoad, ReplayHeaderTakesOneNameOrAListAndDefaultsToIdempotentReplay) {
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
defaults: { scope: { headers: [X-Tenant-Id] } }
routes:
  - name: ours
    match: { path: /a }
  - name: stripe-clients
    match: { path: /b }
    replay_header: Idempotent-Replayed
  - name: both
    match: { path: /c }
    replay_header: [Idempotent-Replay, Idempotent-Replayed, Idempotency-Replayed]
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_TRUE(result.issues.empty()) << all_issues(result);
  EXPECT_EQ(result.config->routes[0].policy.replay_headers, Strings{"Idempotent-Replay"});
  EXPECT_EQ(result.config->routes[1].policy.replay_headers, Strings{"Idempotent-Replayed"});
  EXPECT_EQ(result.config->routes[2].policy.replay_headers,
            (Strings{"Idempotent-Replay", "Idempotent-Replayed", "Idempotency-Replayed"}));
}

TEST(ConfigLoad, KeyFromJsonReadsTheBodyWhenNoHeaderIsSentUnlessKeySourceSaysOtherwise) {
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
defaults: { scope: { headers: [X-Tenant-Id] } }
routes:
  - name: header-only
    match: { path: /a }
  - name: events
    match: { path: /b }
    key_from_json: /id
  - name: queue
    match: { path: /c }
    key_from_json: /detail/message_id
    key_source: json
  - name: header-wins
    match: { path: /d }
    key_from_json: "/meta/request~1id"
    key_source: header
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_TRUE(result.issues.empty()) << all_issues(result);
  const auto& routes = result.config->routes;
  EXPECT_EQ(routes[0].policy.key_source, core::KeySource::header);
  EXPECT_EQ(routes[0].policy.key_from_json, "");
  EXPECT_EQ(routes[1].policy.key_source, core::KeySource::header_then_json);
  EXPECT_EQ(routes[1].policy.key_from_json, "/id");
  EXPECT_EQ(routes[2].policy.key_source, core::KeySource::json);
  EXPECT_EQ(routes[2].policy.key_from_json, "/detail/message_id");
  EXPECT_EQ(routes[3].policy.key_source, core::KeySource::header);
  EXPECT_EQ(routes[3].policy.key_from_json, "/meta/request~1id");
}

TEST(ConfigLoad, KeyExpiresHeaderIsOffByDefaultAndSetPerRouteOrInDefaults) {
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
defaults: { key_expires_header: true, scope: { headers: [X-Tenant-Id] } }
routes:
  - name: told
    match: { path: /a }
  - name: quiet
    match: { path: /b }
    key_expires_header: false
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_FALSE(core::RoutePolicy{}.key_expires_header);
  EXPECT_TRUE(result.config->routes[0].policy.key_expires_header);
  EXPECT_FALSE(result.config->routes[1].policy.key_expires_header);
}

TEST(ConfigLoad, KeyFormatAndMinKeyLengthAreSetPerRouteOrInDefaults) {
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
defaults: { key_format: uuid, scope: { headers: [X-Tenant-Id] } }
routes:
  - name: uuids
    match: { path: /a }
  - name: ulids
    match: { path: /b }
    key_format: ulid
  - name: pattern
    match: { path: /c }
    key_format: "regex:ord_[0-9a-f]{16}"
    min_key_length: 20
  - name: anything
    match: { path: /d }
    key_format: any
    min_key_length: 16
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  const std::vector<core::Route>& routes = result.config->routes;
  EXPECT_EQ(core::RoutePolicy{}.key_format.kind, core::KeyFormatKind::any);
  EXPECT_EQ(core::RoutePolicy{}.min_key_length, 1u);
  EXPECT_EQ(routes[0].policy.key_format.kind, core::KeyFormatKind::uuid);
  EXPECT_EQ(routes[1].policy.key_format.kind, core::KeyFormatKind::ulid);
  EXPECT_EQ(routes[2].policy.key_format.kind, core::KeyFormatKind::regex);
  EXPECT_EQ(routes[2].policy.key_format.pattern, "ord_[0-9a-f]{16}");
  EXPECT_EQ(routes[2].policy.min_key_length, 20u);
  // Compiled once, at load: the route checks keys with it.
  EXPECT_EQ(core::broken_key_rule("ord_0123456789abcdef", 20, routes[2].policy.key_format), std::nullopt);
  EXPECT_NE(core::broken_key_rule("ord_0123456789ABCDEF", 20, routes[2].policy.key_format), std::nullopt);
  EXPECT_EQ(routes[3].policy.key_format.kind, core::KeyFormatKind::any);
  EXPECT_EQ(routes[3].policy.min_key_length, 16u);
}

TEST(ConfigLoad, ProblemsDocsUrlIsUnsetByDefaultAndReloadable) {
  EXPECT_EQ(Config{}.problems.docs_url, "");
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
problems: { docs_url: "https://docs.example.com/idemproxy/errors?lang=en" }
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->problems.docs_url, "https://docs.example.com/idemproxy/errors?lang=en");
  // Not restart-only: a reload puts a new one in force.
  const Config running;
  Config next = running;
  next.problems.docs_url = result.config->problems.docs_url;
  EXPECT_TRUE(restart_only_changes(running, next).empty());
  EXPECT_EQ(keep_restart_only(next, running).problems.docs_url, "https://docs.example.com/idemproxy/errors?lang=en");
}

TEST(ConfigLoad, UpgradesDefaultToWebSocketOnKeylessRoutesAndToNoneOnRequiredOnes) {
  const LoadResult result = load(R"yaml(
store: { postgres: { dsn: x } }
limits: { tunnel_idle_timeout: 90s }
defaults: { scope: { headers: [X-Tenant-Id] } }
routes:
  - name: guarded
    match: { path: /a }
  - name: feed
    match: { path: /b }
    key: off
  - name: optional
    match: { path: /c }
    key: optional
    upgrades: [websocket, foo]
  - name: closed
    match: { path: /d }
    key: off
    upgrades: []
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->limits.tunnel_idle_timeout, std::chrono::seconds(90));
  EXPECT_EQ(LimitsConfig{}.tunnel_idle_timeout, std::chrono::minutes(5));
  EXPECT_EQ(result.config->routes[0].policy.upgrades, Strings{}) << "key: required upgrades nothing";
  EXPECT_EQ(result.config->routes[1].policy.upgrades, Strings{"websocket"});
  EXPECT_EQ(result.config->routes[2].policy.upgrades, (Strings{"websocket", "foo"}));
  EXPECT_EQ(result.config->routes[3].policy.upgrades, Strings{});
}

// ---- warnings -------------------------------------------------------------------------------

TEST(ConfigWarnings, RouteWithoutScopeHeadersWarnsButLoads) {
  const LoadResult result = load(R"yaml(store: { postgres: { dsn: x } }
routes:
  - name: shared
    match: { method: POST, path: /shared }
  - name: unkeyed
    match: { method: POST, path: /unkeyed }
    key: "off"
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);  // key: off needs no scope
  const ConfigIssue& issue = result.issues[0];
  EXPECT_TRUE(issue.warning);
  EXPECT_EQ(issue.line, 3);
  EXPECT_EQ(issue.column, 5);
  EXPECT_EQ(issue.message,
            "route \"shared\" declares no scope headers: every caller of this route shares one key space");
  EXPECT_EQ(issue.to_string(),
            "test.yaml:3:5: warning: route \"shared\" declares no scope headers: every caller of this route shares one "
            "key space");
}

TEST(ConfigWarnings, SafeMethodAndShadowedRouteWarn) {
  const LoadResult result = load(R"yaml(store: { postgres: { dsn: x } }
routes:
  - name: first
    match: { method: [POST, GET], path: /things }
    scope: { headers: [Authorization] }
  - name: second
    match: { method: POST, path: /things }
    scope: { headers: [Authorization] }
)yaml");
  ASSERT_TRUE(result.config) << all_issues(result);
  ASSERT_EQ(result.issues.size(), 2u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:4:29: warning: route \"first\" matches GET, which is never subject to idempotency keys "
            "(GET, HEAD and OPTIONS pass through)");
  EXPECT_EQ(
      result.issues[1].to_string(),
      "test.yaml:6:5: warning: route \"second\" is never used: route \"first\" before it matches the same requests");
}

// ---- ${VAR} expansion -----------------------------------------------------------------------

TEST(ConfigEnv, ExpandsVariablesDefaultsAndEscapes) {
  const LoadResult result = load(R"yaml(
listen: "${HOST:-127.0.0.1}:${PORT}"
store:
  postgres:
    dsn: "postgresql://${PG_USER}:$${PG_PASS}@${PG_HOST:-localhost}:${PG_PORT:-5432}/idem?x=$1"
    pool_size: ${POOL:-16}
)yaml",
                                 fake_env({{"PORT", "9000"}, {"PG_USER", "alice"}, {"PG_PORT", ""}}));
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->listen.host, "127.0.0.1");
  EXPECT_EQ(result.config->listen.port, 9000);
  // $$ is a literal $; an empty variable with a default takes the default; a lone $ stays.
  EXPECT_EQ(result.config->store.postgres.dsn, "postgresql://alice:${PG_PASS}@localhost:5432/idem?x=$1");
  EXPECT_EQ(result.config->store.postgres.pool_size, 16u);
}

TEST(ConfigEnv, VariableValueIsUsedOverItsDefault) {
  const LoadResult result = load("store: { postgres: { dsn: \"${DSN:-fallback}\", pool_size: \"${POOL:-16}\" } }\n",
                                 fake_env({{"DSN", "from-env"}, {"POOL", "3"}}));
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->store.postgres.dsn, "from-env");
  EXPECT_EQ(result.config->store.postgres.pool_size, 3u);
}

TEST(ConfigEnv, ExpandedValueIsValidatedLikeAWrittenOne) {
  const LoadResult result =
      load("store: { postgres: { dsn: x } }\ndefaults:\n  ttl: ${TTL}\n", fake_env({{"TTL", "soon"}}));
  ASSERT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:3:8: bad duration \"soon\" for defaults.ttl (expected e.g. 250ms, 30s, 5m, 24h)");
}

TEST(ConfigEnv, UnsetVariableWithoutDefaultIsAnErrorAtTheValue) {
  const LoadResult result =
      load("listen: 127.0.0.1:8080\nstore:\n  postgres:\n    dsn: \"host=${PG_HOST} port=${PG_PORT}\"\n",
           fake_env({{"PG_HOST", "db"}}));
  ASSERT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:4:10: unknown variable ${PG_PORT} in store.postgres.dsn (set it or give a default with "
            "${PG_PORT:-value})");
}

TEST(ConfigEnv, MalformedReferencesAreErrors) {
  const LoadResult result = load("listen: \"${1HOST}:80\"\nstore:\n  postgres:\n    dsn: \"host=${PG_HOST\"\n");
  ASSERT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 2u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:1:9: bad variable reference \"${1HOST}\" in listen (expected ${NAME} or ${NAME:-default}; write "
            "$$ for a "
            "literal $)");
  EXPECT_EQ(result.issues[1].to_string(),
            "test.yaml:4:10: unterminated \"${PG_HOST\" in store.postgres.dsn (expected ${NAME} or ${NAME:-default}; "
            "write $$ "
            "for a literal $)");
}

TEST(ConfigEnv, ProcessEnvironmentReadsTheRealEnvironment) {
  ASSERT_EQ(::setenv("IDEMPROXY_CONFIG_TEST_DSN", "dbname=from_process_env", 1), 0);
  const LoadResult result =
      load("store: { postgres: { dsn: \"${IDEMPROXY_CONFIG_TEST_DSN}\" } }\n", process_environment());
  ::unsetenv("IDEMPROXY_CONFIG_TEST_DSN");
  ASSERT_TRUE(result.config) << all_issues(result);
  EXPECT_EQ(result.config->store.postgres.dsn, "dbname=from_process_env");
  EXPECT_EQ(process_environment()("IDEMPROXY_CONFIG_TEST_DSN"), std::nullopt);
}

// ---- files ----------------------------------------------------------------------------------

const std::filesystem::path kExampleConfig = IDEMPROXY_EXAMPLE_CONFIG;

TEST(ConfigFile, ShippedExampleLoadsWithoutAnyIssue) {
  const LoadResult result =
      load_config_file(kExampleConfig.string(), fake_env({{"IDEMPROXY_PG_DSN", "postgresql://idem@localhost/idem"}}));
  ASSERT_TRUE(result.config) << kExampleConfig << "\n" << all_issues(result);
  EXPECT_TRUE(result.issues.empty()) << all_issues(result);
  const Config& config = *result.config;
  EXPECT_EQ(config.source_path, kExampleConfig.string());
  EXPECT_EQ(config.store.postgres.dsn, "postgresql://idem@localhost/idem");

  // The example documents the defaults: its values must be the built-in ones.
  const Config built_in;
  EXPECT_EQ(config.listen.host, built_in.listen.host);
  EXPECT_EQ(config.listen.port, built_in.listen.port);
  EXPECT_EQ(config.workers, built_in.workers);
  EXPECT_EQ(config.drain_timeout, built_in.drain_timeout);
  EXPECT_EQ(config.limits.max_request_body, built_in.limits.max_request_body);
  EXPECT_EQ(config.limits.max_header_bytes, built_in.limits.max_header_bytes);
  EXPECT_EQ(config.limits.header_timeout, built_in.limits.header_timeout);
  EXPECT_EQ(config.limits.body_timeout, built_in.limits.body_timeout);
  EXPECT_EQ(config.limits.idle_timeout, built_in.limits.idle_timeout);
  EXPECT_EQ(config.limits.write_timeout, built_in.limits.write_timeout);
  EXPECT_EQ(config.limits.tunnel_idle_timeout, built_in.limits.tunnel_idle_timeout);
  EXPECT_EQ(config.upstreams[0].url, built_in.upstreams[0].url);
  EXPECT_EQ(config.upstreams[0].host, built_in.upstreams[0].host);
  EXPECT_EQ(config.upstreams[0].port, built_in.upstreams[0].port);
  EXPECT_EQ(config.upstreams[0].connect_timeout, built_in.upstreams[0].connect_timeout);
  EXPECT_EQ(config.upstreams[0].timeout, built_in.upstreams[0].timeout);
  EXPECT_EQ(config.upstreams[0].max_connections, built_in.upstreams[0].max_connections);
  EXPECT_EQ(config.upstreams[0].idle_timeout, built_in.upstreams[0].idle_timeout);
  EXPECT_EQ(config.store.postgres.pool_size, built_in.store.postgres.pool_size);
  EXPECT_EQ(config.store.postgres.connect_timeout, built_in.store.postgres.connect_timeout);
  EXPECT_EQ(config.store.postgres.query_timeout, built_in.store.postgres.query_timeout);
  EXPECT_EQ(config.store.postgres.acquire_timeout, built_in.store.postgres.acquire_timeout);

  ASSERT_EQ(config.routes.size(), 3u);
  EXPECT_EQ(config.routes[0].policy.name, "create-order");
  EXPECT_EQ(config.routes[0].policy.ignore_json, Strings{"/client_timestamp"});
  EXPECT_EQ(config.routes[2].policy.key_header, "webhook-id");
  EXPECT_EQ(config.routes[2].policy.key, core::KeyRequirement::optional);
  // The refund route sets nothing but its scope: the rest is the documented defaults.
  const core::RoutePolicy defaults;
  const core::RoutePolicy& refund = config.routes[1].policy;
  EXPECT_EQ(refund.key, defaults.key);
  EXPECT_EQ(refund.key_header, defaults.key_header);
  EXPECT_EQ(refund.max_key_length, defaults.max_key_length);
  EXPECT_EQ(refund.fingerprint_headers, defaults.fingerprint_headers);
  EXPECT_EQ(refund.ignore_json, defaults.ignore_json);
  EXPECT_EQ(refund.release_statuses, defaults.release_statuses);
  EXPECT_EQ(refund.replay_headers, defaults.replay_headers);
  EXPECT_EQ(refund.key_expires_header, defaults.key_expires_header);
  EXPECT_EQ(refund.key_source, defaults.key_source);
  EXPECT_EQ(refund.key_from_json, defaults.key_from_json);
  EXPECT_EQ(refund.ttl, defaults.ttl);
  EXPECT_EQ(refund.lease, defaults.lease);
  EXPECT_EQ(refund.max_stored_body, defaults.max_stored_body);
  EXPECT_EQ(refund.store_set_cookie, defaults.store_set_cookie);
  EXPECT_EQ(refund.unknown_outcome, defaults.unknown_outcome);
  EXPECT_EQ(refund.store_unavailable, defaults.store_unavailable);
  EXPECT_EQ(refund.in_flight, defaults.in_flight);
  EXPECT_EQ(refund.wait_timeout, defaults.wait_timeout);
}

TEST(ConfigFile, MalformedStreamThatHungYamlCppLoadAllIsAnError) {
  // Found by fuzz_config_load: yaml-cpp 0.7's LoadAll appends documents without end on a lone ",".
  const LoadResult result = load(",");
  EXPECT_FALSE(result.config);
  ASSERT_FALSE(result.issues.empty());
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:1:1: a config file holds one YAML document; found a second one here");
}

TEST(ConfigFile, ConfigFileThatIsNotARegularFileIsRefused) {
  const LoadResult result = load_config_file("/dev/zero", fake_env());
  ASSERT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 1u);
  EXPECT_EQ(result.issues[0].to_string(), "/dev/zero: cannot read config file: not a regular file");
}

TEST(ConfigFile, UnreadableFileIsAnIssueWithoutPosition) {
  const std::string path = (std::filesystem::temp_directory_path() / "idemproxy-config-test-missing.yaml").string();
  std::filesystem::remove(path);
  const LoadResult result = load_config_file(path, fake_env());
  ASSERT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 1u);
  EXPECT_EQ(result.issues[0].line, 0);
  EXPECT_EQ(result.issues[0].column, 0);
  EXPECT_EQ(result.issues[0].to_string(), path + ": cannot read config file: No such file or directory");
}

TEST(ConfigFile, IssuesInAFileNameTheFile) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "idemproxy-config-test-bad.yaml";
  {
    std::ofstream out(path);
    out << "store: { postgres: { dsn: x } }\nworkers: many\n";
  }
  const LoadResult result = load_config_file(path.string(), fake_env());
  std::filesystem::remove(path);
  ASSERT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            path.string() + ":2:10: bad number \"many\" for workers (expected an integer from 0 to 1024)");
}

}  // namespace
}  // namespace idem::config
