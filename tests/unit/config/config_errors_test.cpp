// Every validation error: exact message and exact file:line:col of the offending node.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config_loader.hpp"
#include "config_test_support.hpp"
#include "core/route_table.hpp"
#include "fingerprint/canonical_json.hpp"

namespace idem::config {
namespace {

using test::all_issues;
using test::load;

struct ErrorCase {
  const char* name;
  std::string yaml;
  std::string expected;  // the one issue's to_string(): "test.yaml:line:col: message"
};

void PrintTo(const ErrorCase& error_case, std::ostream* out) { *out << error_case.name; }

// Line 1 of most cases: a valid store, so the case's own error is the only one.
const std::string kStore = "store: { postgres: { dsn: x } }\n";
// Lines 1-5: a valid route whose 6th line is the case's.
const std::string kRoute =
    kStore + "routes:\n  - name: a\n    match: { path: /a }\n    scope: { headers: [Authorization] }\n";
const std::string kLeaseMessageTail =
    ": a lease that lapses while the first request may still run lets a retry execute it again";
// The longest exchange with upstream.timeout 90s and every other timeout at its default.
const std::string kBudget90s =
    " must be at least the longest exchange plus a 1s margin (97s = 2 × store.postgres.query_timeout 2s + "
    "store.postgres.acquire_timeout 1s + upstream.connect_timeout 1s + upstream.timeout 90s + margin 1s)";

std::vector<ErrorCase> error_cases() {
  return {
      {"unknown_top_level_key", kStore + "lisen: 127.0.0.1:8080\n",
       "test.yaml:2:1: unknown key \"lisen\" at the top level (expected one of: listen, tls, workers, drain_timeout, "
       "limits, "
       "upstream, upstreams, store, reaper, replay_cache, log, problems, admin, defaults, routes)"},
      {"unknown_route_key", kRoute + "    foo: 1\n",
       "test.yaml:6:5: unknown key \"foo\" in routes[0] (expected one of: name, match, key_header, key, "
       "max_key_length, min_key_length, key_format, "
       "key_from_json, key_source, ttl, lease, max_stored_body, scope, fingerprint, release_statuses, replay_header, "
       "key_expires_header, store_set_cookie, unknown_outcome, store_unavailable, "
       "in_flight, wait_timeout, unknown_retention, upgrades, upstream, timeout, stream_idle_timeout, max_request_body)"},
      {"replay_header_not_a_token", kRoute + "    replay_header: \"Idempotent Replay\"\n",
       "test.yaml:6:20: bad header name \"Idempotent Replay\" for routes[0].replay_header (expected an RFC 9110 "
       "token)"},
      {"replay_header_list_element_not_a_token", kRoute + "    replay_header: [Idempotent-Replay, \"a:b\"]\n",
       "test.yaml:6:40: bad header name \"a:b\" in routes[0].replay_header (expected an RFC 9110 token)"},
      {"replay_header_duplicate", kRoute + "    replay_header: [Idempotent-Replay, idempotent-replay]\n",
       "test.yaml:6:40: duplicate header \"idempotent-replay\" in routes[0].replay_header"},
      {"replay_header_empty_list", kRoute + "    replay_header: []\n",
       "test.yaml:6:20: routes[0].replay_header is an empty list: a client could not tell a replay from a first "
       "execution"},
      {"key_from_json_not_a_pointer", kRoute + "    key_from_json: id\n",
       "test.yaml:6:20: bad JSON pointer \"id\" for routes[0].key_from_json: a JSON Pointer must be empty or start "
       "with '/'"},
      {"key_from_json_whole_body", kRoute + "    key_from_json: \"\"\n",
       "test.yaml:6:20: JSON pointer \"\" for routes[0].key_from_json addresses the whole body, which is never a "
       "string key (e.g. /id)"},
      {"key_source_json_without_pointer", kRoute + "    key_source: json\n",
       "test.yaml:6:17: route \"a\": key_source json reads the key from the body and needs key_from_json (e.g. "
       "key_from_json: /id)"},
      {"bad_key_source", kRoute + "    key_source: body\n",
       "test.yaml:6:17: bad value \"body\" for routes[0].key_source (expected header | header_then_json | json)"},
      {"upgrades_h2c", kRoute + "    key: off\n    upgrades: [websocket, h2c]\n",
       "test.yaml:7:27: h2c in routes[0].upgrades is never forwarded: the proxy speaks HTTP/1.1 to its upstream, and "
       "strips an h2c offer so the client goes on in HTTP/1.1"},
      {"upgrades_on_a_required_key", kRoute + "    upgrades: [websocket]\n",
       "test.yaml:6:15: route \"a\": key: required refuses every upgrade (a tunnel cannot be fingerprinted, stored or "
       "replayed); give the upgrades a route with key: off or optional"},
      {"upgrades_bad_name", kRoute + "    key: optional\n    upgrades: [\"web socket\"]\n",
       "test.yaml:7:16: bad protocol name \"web socket\" in routes[0].upgrades (expected a name such as websocket)"},
      {"upgrades_duplicate", kRoute + "    key: off\n    upgrades: [websocket, WebSocket]\n",
       "test.yaml:7:27: duplicate protocol \"WebSocket\" in routes[0].upgrades"},
      {"bad_tunnel_idle_timeout", kStore + "limits: { tunnel_idle_timeout: 5x }\n",
       "test.yaml:2:32: bad duration \"5x\" for limits.tunnel_idle_timeout (expected e.g. 250ms, 30s, 5m, 24h)"},
      {"bad_key_expires_header", kRoute + "    key_expires_header: on\n",
       "test.yaml:6:25: bad boolean \"on\" for routes[0].key_expires_header (expected true or false)"},
      {"unknown_limits_key", kStore + "limits:\n  max_body: 1MiB\n",
       "test.yaml:3:3: unknown key \"max_body\" in limits (expected one of: max_request_body, max_response_body, "
       "max_header_bytes, max_request_line, header_timeout, body_timeout, idle_timeout, write_timeout, max_waiting, "
       "max_headers, max_connections, tunnel_idle_timeout)"},
      {"unknown_match_key",
       kStore + "routes:\n  - name: a\n    match: { path: /a, verb: POST }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:4:24: unknown key \"verb\" in routes[0].match (expected one of: method, path, host, "
       "case_insensitive, trailing_slash)"},
      {"duplicate_key", kStore + "workers: 2\nworkers: 4\n",
       "test.yaml:3:1: duplicate key \"workers\" at the top level (first given at line 2)"},
      {"bad_duration", kStore + "defaults:\n  ttl: 5x\n",
       "test.yaml:3:8: bad duration \"5x\" for defaults.ttl (expected e.g. 250ms, 30s, 5m, 24h)"},
      {"negative_duration", kRoute + "    lease: -5s\n",
       "test.yaml:6:12: bad duration \"-5s\" for routes[0].lease (expected e.g. 250ms, 30s, 5m, 24h)"},
      {"duration_without_unit", kStore + "drain_timeout: 30\n",
       "test.yaml:2:16: bad duration \"30\" for drain_timeout (expected e.g. 250ms, 30s, 5m, 24h)"},
      {"zero_timeout", kStore + "upstream:\n  timeout: 0\n", "test.yaml:3:12: upstream.timeout must be greater than 0"},
      {"bad_size", kStore + "limits:\n  max_request_body: 10XB\n",
       "test.yaml:3:21: bad size \"10XB\" for limits.max_request_body (expected e.g. 512, 64KiB, 10MiB, 1GB)"},
      {"header_limit_too_large", kStore + "limits:\n  max_header_bytes: 2MiB\n",
       "test.yaml:3:21: limits.max_header_bytes must be at most 1048576 bytes (got 2MiB)"},
      {"zero_size", kStore + "defaults:\n  max_stored_body: 0\n",
       "test.yaml:3:20: defaults.max_stored_body must be greater than 0"},
      {"status_out_of_range", kRoute + "    release_statuses: [408, 1000]\n",
       "test.yaml:6:29: bad status 1000 in routes[0].release_statuses (expected 100-599)"},
      {"status_not_a_number", kRoute + "    release_statuses: [408, abc]\n",
       "test.yaml:6:29: bad status \"abc\" in routes[0].release_statuses (expected 100-599)"},
      {"statuses_not_a_list", kRoute + "    release_statuses: 503\n",
       "test.yaml:6:23: routes[0].release_statuses must be a list, not a single value"},
      {"route_without_name", kStore + "routes:\n  - match: { path: /a }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:3:5: route without a name"},
      {"route_with_empty_name",
       kStore + "routes:\n  - name: \"\"\n    match: { path: /a }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:3:11: route without a name"},
      {"duplicate_route_name",
       kRoute + "  - name: a\n    match: { path: /b }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:6:11: duplicate route name \"a\" (first used at line 3)"},
      {"bad_route_name",
       kStore +
           "routes:\n  - name: \"create order\"\n    match: { path: /a }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:3:11: bad route name \"create order\" (expected up to 64 letters, digits, '.', '_' or '-')"},
      {"route_without_match", kStore + "routes:\n  - name: a\n    scope: { headers: [Authorization] }\n",
       "test.yaml:3:5: routes[0] has no match (e.g. match: { method: POST, path: /orders })"},
      {"match_without_path",
       kStore + "routes:\n  - name: a\n    match: { method: POST }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:4:12: routes[0].match.path is required (e.g. path: /orders)"},
      {"lower_case_method",
       kStore +
           "routes:\n  - name: a\n    match: { method: post, path: /a }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:4:22: method \"post\" in routes[0].match.method must be upper case (HTTP methods are "
       "case-sensitive)"},
      {"bad_method",
       kStore + "routes:\n  - name: a\n    match: { method: [POST, \"GO AWAY\"], path: /a }\n    scope: { headers: "
                "[Authorization] }\n",
       "test.yaml:4:29: bad method \"GO AWAY\" in routes[0].match.method (expected an HTTP method such as POST)"},
      {"empty_method_list",
       kStore + "routes:\n  - name: a\n    match: { method: [], path: /a }\n    scope: { headers: [Authorization] }\n",
       "test.yaml:4:22: routes[0].match.method is an empty list (leave method out to match every method)"},
      {"empty_json_pointer", kRoute + "    fingerprint: { ignore_json: [\"\"] }\n",
       "test.yaml:6:34: JSON pointer \"\" in routes[0].fingerprint.ignore_json addresses the whole body, which would "
       "leave it out "
       "of the fingerprint"},
      {"upstream_other_scheme", kStore + "upstream:\n  url: ftp://api.internal:8443\n",
       "test.yaml:3:8: upstream.url must be http://host[:port], https://host[:port] or unix:/path/to.sock, got "
       "\"ftp://api.internal:8443\""},
      {"upstream_with_path", kStore + "upstream:\n  url: http://backend/api\n",
       "test.yaml:3:8: upstream.url must be http://host[:port], https://host[:port] or unix:/path/to.sock, got \"http://backend/api\""},
      {"upstream_bad_port", kStore + "upstream:\n  url: http://backend:70000\n",
       "test.yaml:3:8: upstream.url must be http://host[:port], https://host[:port] or unix:/path/to.sock, got \"http://backend:70000\""},
      {"listener_tls_without_key", kStore + "tls:\n  cert_file: /etc/hostname\n",
       "test.yaml:3:3: tls needs both cert_file and key_file"},
      {"listener_tls_missing_file", kStore + "tls:\n  cert_file: /nonexistent/tls.crt\n  key_file: /etc/hostname\n",
       "test.yaml:3:14: tls.cert_file: cannot read \"/nonexistent/tls.crt\": No such file or directory"},
      {"listener_tls_bad_version",
       kStore + "tls:\n  cert_file: /etc/hostname\n  key_file: /etc/hostname\n  min_version: \"1.1\"\n",
       "test.yaml:5:16: bad value \"1.1\" for tls.min_version (expected 1.2 | 1.3)"},
      {"upstream_client_cert_without_key",
       kStore + "upstream:\n  url: https://api\n  tls:\n    cert_file: /etc/hostname\n",
       "test.yaml:5:5: upstream.tls: a client certificate needs both cert_file and key_file"},
      {"upstream_missing_ca", kStore + "upstream:\n  url: https://api\n  tls: { ca_file: /nonexistent/ca.pem }\n",
       "test.yaml:4:19: upstream.tls.ca_file: cannot read \"/nonexistent/ca.pem\": No such file or directory"},
      {"token_file_device", kStore + "admin: { token_file: /dev/zero }\n",
       "test.yaml:2:22: cannot read admin.token_file \"/dev/zero\": not a regular file"},
      {"tls_cert_is_a_device", kStore + "tls: { cert_file: /dev/zero, key_file: /proc/self/cmdline }\n",
       "test.yaml:2:19: tls.cert_file: cannot read \"/dev/zero\": not a regular file"},
      {"redis_cache_bad_address", "store:\n  postgres: { dsn: x }\n  redis: { address: \"redis\" }\n",
       "test.yaml:3:21: bad address \"redis\" for store.redis.address (expected host:port, e.g. 127.0.0.1:6379)"},
      {"redis_cache_no_address", "store:\n  postgres: { dsn: x }\n  redis: { timeout: 5ms }\n",
       "test.yaml:3:10: store.redis.address is required (e.g. address: 127.0.0.1:6379)"},
      {"missing_dsn", "listen: 127.0.0.1:8080\nstore:\n  postgres:\n    pool_size: 4\n",
       "test.yaml:4:5: store.postgres.dsn is required (e.g. dsn: \"${IDEMPROXY_PG_DSN}\")"},
      {"missing_store", "\nlisten: 127.0.0.1:8080\n",
       "test.yaml:2:1: store.postgres.dsn is required (e.g. dsn: \"${IDEMPROXY_PG_DSN}\")"},
      {"empty_document", "# nothing yet\n",
       "test.yaml:1:1: store.postgres.dsn is required (e.g. dsn: \"${IDEMPROXY_PG_DSN}\")"},
      {"unknown_variable", "store:\n  postgres:\n    dsn: \"${PG_DSN}\"\n",
       "test.yaml:3:10: unknown variable ${PG_DSN} in store.postgres.dsn (set it or give a default with "
       "${PG_DSN:-value})"},
      {"listen_without_port", kStore + "listen: localhost\n",
       "test.yaml:2:9: bad listen address \"localhost\" (expected host:port, e.g. 127.0.0.1:8080 or \"[::1]:8080\", or unix:/path)"},
      {"listen_port_zero", kStore + "listen: 127.0.0.1:0\n",
       "test.yaml:2:9: bad listen address \"127.0.0.1:0\" (expected host:port, e.g. 127.0.0.1:8080 or \"[::1]:8080\", or unix:/path)"},
      {"listen_unbracketed_ipv6", kStore + "listen: \"::1:8080\"\n",
       "test.yaml:2:9: bad listen address \"::1:8080\" (expected host:port, e.g. 127.0.0.1:8080 or \"[::1]:8080\", or unix:/path)"},
      {"bad_scope_header",
       kStore + "routes:\n  - name: a\n    match: { path: /a }\n    scope:\n      headers:\n        - Authorization\n  "
                "      - \"X Tenant\"\n",
       "test.yaml:8:11: bad header name \"X Tenant\" in routes[0].scope.headers (expected an RFC 9110 token)"},
      {"bad_key_header", kRoute + "    key_header: \"Idempotency Key\"\n",
       "test.yaml:6:17: bad header name \"Idempotency Key\" for routes[0].key_header (expected an RFC 9110 token)"},
      {"duplicate_scope_header",
       kStore +
           "routes:\n  - name: a\n    match: { path: /a }\n    scope: { headers: [Authorization, authorization] }\n",
       "test.yaml:5:39: duplicate header \"authorization\" in routes[0].scope.headers"},
      {"pool_size_zero", "store:\n  postgres:\n    dsn: x\n    pool_size: 0\n",
       "test.yaml:4:16: store.postgres.pool_size must be at least 1 (got 0)"},
      {"workers_not_a_number", kStore + "workers: -1\n",
       "test.yaml:2:10: bad number \"-1\" for workers (expected an integer from 0 to 1024)"},
      {"key_length_too_large", kStore + "defaults:\n  max_key_length: 5000\n",
       "test.yaml:3:19: defaults.max_key_length must be at most 1024 (got 5000)"},
      {"ttl_not_above_lease", kRoute + "    ttl: 30s\n",
       "test.yaml:6:10: route \"a\": ttl (30s) must exceed lease (60s)"},
      {"ttl_not_above_lease_from_defaults",
       kStore + "defaults: { ttl: 1m }\nroutes:\n  - name: a\n    match: { path: /a }\n    scope: { headers: "
                "[Authorization] }\n",
       "test.yaml:4:5: route \"a\": ttl (60s) must exceed lease (60s)"},
      {"lease_not_above_upstream_timeout",
       kStore + "upstream: { timeout: 90s }\nroutes:\n  - name: a\n    match: { path: /a }\n    scope: { headers: "
                "[Authorization] }\n",
       "test.yaml:4:5: route \"a\": lease (60s)" + kBudget90s + kLeaseMessageTail},
      {"bad_key_requirement", kRoute + "    key: maybe\n",
       "test.yaml:6:10: bad value \"maybe\" for routes[0].key (expected required | optional | off)"},
      {"bad_unknown_outcome", kStore + "defaults:\n  unknown_outcome: unlock\n",
       "test.yaml:3:20: bad value \"unlock\" for defaults.unknown_outcome (expected lock | retry)"},
      {"bad_store_unavailable", kStore + "defaults:\n  store_unavailable: open\n",
       "test.yaml:3:22: bad value \"open\" for defaults.store_unavailable (expected fail_closed | fail_open)"},
      {"bad_in_flight", kStore + "defaults:\n  in_flight: queue\n",
       "test.yaml:3:14: bad value \"queue\" for defaults.in_flight (expected reject | wait)"},
      {"bad_boolean", kStore + "defaults:\n  store_set_cookie: yes\n",
       "test.yaml:3:21: bad boolean \"yes\" for defaults.store_set_cookie (expected true or false)"},
      {"section_of_wrong_type", kStore + "limits: [1, 2]\n",
       "test.yaml:2:9: limits must be a mapping of options, not a list"},
      {"scalar_of_wrong_type", kStore + "workers: [1]\n", "test.yaml:2:10: workers must be a single value, not a list"},
      {"routes_of_wrong_type", kStore + "routes: { name: a }\n", "test.yaml:2:9: routes must be a list, not a mapping"},
      {"value_missing", kStore + "defaults:\n  ttl:\n  lease: 30s\n", "test.yaml:3:3: defaults.ttl has no value"},
      {"top_level_not_a_mapping", "- listen\n- store\n",
       "test.yaml:1:1: the config must be a mapping of options, not a list"},
      {"yaml_syntax_error", "a: b\n  c: d\n", "test.yaml:2:4: invalid YAML: illegal map value"},
      {"second_document", kStore + "---\nworkers: 2\n",
       "test.yaml:2:1: a config file holds one YAML document; found a second one here"},
      {"bad_key_format", kRoute + "    key_format: guid\n",
       "test.yaml:6:17: bad routes[0].key_format \"guid\": expected any, uuid, ulid or \"regex:<regular expression>\""},
      {"bad_key_format_regex", kRoute + "    key_format: \"regex:^[a-z+$\"\n",
       "test.yaml:6:17: bad routes[0].key_format \"regex:^[a-z+$\": not a valid ECMAScript regular expression: "
       "Unexpected character within '[...]' in regular expression"},
      {"bad_key_format_regex_in_defaults", kStore + "defaults:\n  key_format: \"regex:(abc\"\n",
       "test.yaml:3:15: bad defaults.key_format \"regex:(abc\": not a valid ECMAScript regular expression: "
       "Mismatched '(' and ')' in regular expression"},
      {"empty_key_format_regex", kRoute + "    key_format: \"regex:\"\n",
       "test.yaml:6:17: bad routes[0].key_format \"regex:\": the regular expression after \"regex:\" is empty"},
      {"min_key_length_above_max", kRoute + "    min_key_length: 40\n    max_key_length: 32\n",
       "test.yaml:6:21: route \"a\": min_key_length (40) exceeds max_key_length (32): no key could be accepted"},
      {"uuid_longer_than_max_key_length", kRoute + "    max_key_length: 32\n    key_format: uuid\n",
       "test.yaml:7:17: route \"a\": key_format uuid keys are 36 characters long, outside min_key_length 1 to "
       "max_key_length 32: no key could be accepted"},
      {"docs_url_not_http", kStore + "problems: { docs_url: \"ftp://docs.example.com/errors\" }\n",
       "test.yaml:2:23: bad problems.docs_url \"ftp://docs.example.com/errors\": expected an absolute http:// or "
       "https:// URL, e.g. https://docs.example.com/errors"},
      {"docs_url_relative", kStore + "problems: { docs_url: /errors }\n",
       "test.yaml:2:23: bad problems.docs_url \"/errors\": expected an absolute http:// or https:// URL, e.g. "
       "https://docs.example.com/errors"},
      {"docs_url_without_host", kStore + "problems:\n  docs_url: https:///errors\n",
       "test.yaml:3:13: bad problems.docs_url \"https:///errors\": the URL has no host"},
      {"docs_url_with_fragment", kStore + "problems:\n  docs_url: \"https://docs.example.com/errors#top\"\n",
       "test.yaml:3:13: bad problems.docs_url \"https://docs.example.com/errors#top\": the URL has a fragment (#...): "
       "each problem's slug is appended as the fragment"},
      {"docs_url_with_space", kStore + "problems:\n  docs_url: \"https://docs.example.com/my errors\"\n",
       "test.yaml:3:13: bad problems.docs_url \"https://docs.example.com/my errors\": the URL holds a character a URI "
       "must percent-encode (spaces, quotes, <, >, non-ASCII...)"},
      {"unknown_problems_key", kStore + "problems: { docs: https://docs.example.com }\n",
       "test.yaml:2:13: unknown key \"docs\" in problems (expected one of: docs_url)"},
  };
}

class ConfigError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ConfigError, IsReportedAloneAtItsPosition) {
  const LoadResult result = load(GetParam().yaml);
  EXPECT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_FALSE(result.issues[0].warning);
  EXPECT_EQ(result.issues[0].to_string(), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(Table, ConfigError, ::testing::ValuesIn(error_cases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.name); });

// The explanations come from the modules that own the syntax; the config adds the position.
TEST(ConfigErrors, HttpsUpstreamCountsTheHandshakeAndStoreTimeoutsCountInTheBudget) {
  // TLS: a second connect_timeout for the handshake; the claim's reply and the completion: twice
  // the query timeout plus the acquire timeout. 2 × 500ms + 250ms + 2 × 1s + 30s + 1s = 34250ms.
  const LoadResult result = load(R"yaml(store: { postgres: { dsn: x, query_timeout: 500ms, acquire_timeout: 250ms } }
upstream: { url: "https://api.internal", timeout: 30s, tls: { verify: false } }
routes:
  - name: a
    match: { path: /a }
    scope: { headers: [Authorization] }
    lease: 34s
  - name: b
    match: { path: /b }
    scope: { headers: [Authorization] }
    lease: 34250ms
)yaml");
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_EQ(
      result.issues[0].to_string(),
      "test.yaml:7:12: route \"a\": lease (34s) must be at least the longest exchange plus a 1s margin (34250ms = "
      "2 × store.postgres.query_timeout 500ms + store.postgres.acquire_timeout 250ms + 2 × upstream.connect_timeout 1s "
      "+ "
      "upstream.timeout 30s + margin 1s)" +
          kLeaseMessageTail);
}

TEST(ConfigErrors, DrainTimeoutDefaultsToOneExchangeAndAShorterOneIsAWarning) {
  const std::string routes =
      "routes:\n  - name: a\n    match: { path: /a }\n    scope: { headers: [Authorization] }\n    lease: 90s\n";
  const LoadResult defaulted = load(kStore + "upstream: { timeout: 60s }\n" + routes);
  ASSERT_TRUE(defaulted.config) << all_issues(defaulted);
  EXPECT_TRUE(defaulted.issues.empty()) << all_issues(defaulted);
  EXPECT_EQ(defaulted.config->drain_timeout, std::chrono::milliseconds(67'000));  // 2 × 2s + 1s + 1s + 60s + 1s

  const LoadResult short_drain = load(kStore + "upstream: { timeout: 60s }\ndrain_timeout: 30s\n" + routes);
  ASSERT_TRUE(short_drain.config) << all_issues(short_drain);
  EXPECT_EQ(short_drain.config->drain_timeout, std::chrono::milliseconds(30'000));
  ASSERT_EQ(short_drain.issues.size(), 1u) << all_issues(short_drain);
  EXPECT_EQ(short_drain.issues[0].to_string(),
            "test.yaml:3:16: warning: drain_timeout (30s) is shorter than the longest exchange (66s = 2 × "
            "store.postgres.query_timeout 2s + store.postgres.acquire_timeout 1s + upstream.connect_timeout 1s + "
            "upstream.timeout 60s): a shutdown can cut requests in progress and the writes that store their responses");
}

TEST(ConfigErrors, BadPathPatternCarriesTheRouteTablesReason) {
  const std::string why = core::path_pattern_error("orders");
  ASSERT_FALSE(why.empty());
  const LoadResult result =
      load(kStore + "routes:\n  - name: a\n    match: { path: orders }\n    scope: { headers: [Authorization] }\n");
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:4:20: bad path pattern \"orders\" in routes[0].match.path: " + why);
}

TEST(ConfigErrors, BadJsonPointerCarriesTheFingerprintReason) {
  const std::string why = fingerprint::json_pointer_error("client_timestamp");
  ASSERT_FALSE(why.empty());
  const LoadResult result = load(kRoute + "    fingerprint: { ignore_json: [/ok, client_timestamp] }\n");
  ASSERT_EQ(result.issues.size(), 1u) << all_issues(result);
  EXPECT_EQ(result.issues[0].to_string(),
            "test.yaml:6:39: bad JSON pointer \"client_timestamp\" in routes[0].fingerprint.ignore_json: " + why);
}

TEST(ConfigErrors, LeaseIsCheckedAgainstTheLongestExchangeForEveryRoute) {
  const LoadResult result = load(kStore + R"yaml(upstream: { timeout: 90s }
routes:
  - name: a
    match: { path: /a }
    scope: { headers: [Authorization] }
  - name: b
    match: { path: /b }
    scope: { headers: [Authorization] }
    lease: 96s
  - name: c
    match: { path: /c }
    scope: { headers: [Authorization] }
    lease: 97s
)yaml");
  EXPECT_FALSE(result.config);
  ASSERT_EQ(result.issues.size(), 2u) << all_issues(result);
  // b's lease covers the longest exchange exactly, but not the margin.
  EXPECT_EQ(result.issues[0].to_string(), "test.yaml:4:5: route \"a\": lease (60s)" + kBudget90s + kLeaseMessageTail);
  EXPECT_EQ(result.issues[1].to_string(), "test.yaml:10:12: route \"b\": lease (96s)" + kBudget90s + kLeaseMessageTail);
}

TEST(ConfigErrors, EveryProblemIsReportedInFileOrder) {
  const LoadResult result = load(R"yaml(listen: nowhere
workers: -1
store:
  postgres:
    dsn: x
    pool_size: 0
defaults:
  ttl: 5x
  key: maybe
routes:
  - match: { method: POST, path: /a }
    scope: { headers: [Authorization] }
    bogus: true
  - name: b
    match: { path: /b }
    release_statuses: [1000]
)yaml");
  EXPECT_FALSE(result.config);
  std::vector<std::string> lines;
  for (const ConfigIssue& issue : result.issues) lines.push_back(issue.to_string());
  const std::vector<std::string> expected = {
      "test.yaml:1:9: bad listen address \"nowhere\" (expected host:port, e.g. 127.0.0.1:8080 or \"[::1]:8080\", or unix:/path)",
      "test.yaml:2:10: bad number \"-1\" for workers (expected an integer from 0 to 1024)",
      "test.yaml:6:16: store.postgres.pool_size must be at least 1 (got 0)",
      "test.yaml:8:8: bad duration \"5x\" for defaults.ttl (expected e.g. 250ms, 30s, 5m, 24h)",
      "test.yaml:9:8: bad value \"maybe\" for defaults.key (expected required | optional | off)",
      "test.yaml:11:5: route without a name",
      "test.yaml:13:5: unknown key \"bogus\" in routes[0] (expected one of: name, match, key_header, key, "
      "max_key_length, min_key_length, key_format, key_from_json, key_source, ttl, lease, max_stored_body, scope, "
      "fingerprint, release_statuses, "
      "replay_header, key_expires_header, store_set_cookie, unknown_outcome, store_unavailable, in_flight, "
      "wait_timeout, unknown_retention, upgrades, upstream, timeout, stream_idle_timeout, max_request_body)",
      "test.yaml:14:5: warning: route \"b\" declares no scope headers: every caller of this route shares one key space",
      "test.yaml:16:24: bad status 1000 in routes[1].release_statuses (expected 100-599)",
  };
  EXPECT_EQ(lines, expected);
}

}  // namespace
}  // namespace idem::config
