// /admin/keys/{route}/{key}: inspecting a record (never its body) with the scope headers of the
// original request, and releasing an unknown-outcome record so the next retry executes. Every
// admin action is logged with a hash of the key, never the key.
#include <future>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"
#include "support/eventually.hpp"

namespace idem::test::ops {
namespace {

using e2e::order;

constexpr std::string_view kTenant = "acme";
// The routes scope keys by host: the admin API names the original request's host (the test
// clients send Host 127.0.0.1:<port>; the port is not part of the scope).
constexpr const char* kOriginalHost = "?host=127.0.0.1";

std::vector<std::pair<std::string, std::string>> tenant(std::string_view value = kTenant) {
  return {{"X-Tenant-Id", std::string(value)}};
}

boost::json::object parse_object(const HttpResponse& response) {
  boost::system::error_code ec;
  auto value = boost::json::parse(response.body, ec);
  if (ec || !value.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << describe(response);
    return {};
  }
  return std::move(value.as_object());
}

// Every admin_<action> line names the key by its hash, and the raw key is nowhere in the log.
void expect_logged_by_hash(Process& proxy, std::string_view action, const std::string& key, std::size_t at_least) {
  const std::string log = proxy.stderr_text() + proxy.stdout_text();
  std::size_t matching = 0;
  for (const auto& line : events(log, action)) {
    if (string_field(line, "key_hash") == key_sha256_prefix(key)) ++matching;
  }
  EXPECT_GE(matching, at_least) << action << " lines for " << key_sha256_prefix(key) << ":\n" << log;
  EXPECT_EQ(log.find(key), std::string::npos) << "the raw key is in the proxy's log";
}

class OpsAdminKeys : public ProxyTest {};

TEST_F(OpsAdminKeys, InspectShowsACompletedRecordWithoutItsBodyAndReleaseLeavesItAlone) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  const std::string key = unique_key("inspect");
  const std::string marker = unique_key("stored-body-marker");
  // The upstream echoes the request body: the stored response body carries the marker.
  const HttpResponse first =
      send(order(key, R"({"note":")" + marker + "\"}", kTenant).with("X-Test-Echo", "1"));
  ASSERT_EQ(first.status, 200) << describe(first);
  ASSERT_NE(first.body.find(marker), std::string::npos) << describe(first);

  const HttpResponse inspected = admin_get(admin, "/admin/keys/orders/" + key + kOriginalHost, std::nullopt, tenant());
  ASSERT_EQ(inspected.status, 200) << describe(inspected);
  EXPECT_EQ(inspected.header("Content-Type"), "application/json");
  const auto record = parse_object(inspected);
  EXPECT_EQ(string_field(record, "state"), "completed") << inspected.body;
  EXPECT_EQ(string_field(record, "route"), "orders") << inspected.body;
  EXPECT_EQ(int_field(record, "response_status"), 200) << inspected.body;
  EXPECT_EQ(int_field(record, "body_bytes"), static_cast<std::int64_t>(first.body.size())) << inspected.body;
  EXPECT_FALSE(string_field(record, "fingerprint").value_or("").empty()) << inspected.body;
  EXPECT_GT(int_field(record, "completed_at_ms").value_or(0), 0) << inspected.body;
  EXPECT_GT(int_field(record, "expires_at_ms").value_or(0), int_field(record, "created_at_ms").value_or(0));
  EXPECT_EQ(inspected.body.find(marker), std::string::npos) << "the admin API showed the stored body";

  // The scope member is what ?scope= takes instead of the headers.
  const std::string scope = string_field(record, "scope").value_or("");
  ASSERT_FALSE(scope.empty()) << inspected.body;
  const HttpResponse by_scope = admin_get(admin, "/admin/keys/orders/" + key + "?scope=" + percent_encode(scope));
  EXPECT_EQ(by_scope.status, 200) << describe(by_scope);
  EXPECT_EQ(string_field(parse_object(by_scope), "state"), "completed");

  // Another tenant's scope, or a key nobody used: no record.
  e2e::expect_problem(admin_get(admin, "/admin/keys/orders/" + key + kOriginalHost, std::nullopt, tenant("other-tenant")), 404,
                      "not-found");
  e2e::expect_problem(admin_get(admin, "/admin/keys/orders/" + unique_key("never-used") + kOriginalHost, std::nullopt, tenant()), 404,
                      "not-found");
  e2e::expect_problem(admin_get(admin, "/admin/keys/no-such-route/" + key + kOriginalHost, std::nullopt, tenant()), 404, "not-found");

  // A completed record is never released: 404, and it still replays without a second execution.
  e2e::expect_problem(admin_post(admin, "/admin/keys/orders/" + key + "/release" + kOriginalHost, std::nullopt, tenant()), 404,
                      "not-found");
  const HttpResponse replay = send(order(key, R"({"note":")" + marker + "\"}", kTenant).with("X-Test-Echo", "1"));
  EXPECT_EQ(replay.status, 200) << describe(replay);
  EXPECT_TRUE(e2e::is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);

  expect_logged_by_hash(*proxy().proxy_process(), "admin_inspect", key, 3);
  expect_logged_by_hash(*proxy().proxy_process(), "admin_release", key, 1);
}

// A 1 s upstream timeout on a lock route leaves the record "unknown": retries get 502 until an
// operator releases it through the admin API; then the retry executes. The lease, 6 s, is the timing
// model's shortest with the fixture's timeouts (2 × query 1 s + acquire 500 ms + connect 1 s +
// upstream 1 s + margin 1 s = 5.5 s), rounded up.
class OpsAdminKeysUnknownOutcome : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    const std::string defaults = "defaults: { ttl: 1h, lease: 10s }";
    std::string text(default_config_template());
    text.replace(text.find(defaults), defaults.size(), "defaults: { ttl: 1h, lease: 6s, unknown_outcome: lock }");
    options.config_template = text;
    options.variables["UPSTREAM_TIMEOUT"] = "1s";
    return options;
  }
};

TEST_F(OpsAdminKeysUnknownOutcome, ReleaseLetsTheRetryExecute) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  const std::string key = unique_key("unknown");
  const std::string record = "/admin/keys/orders/" + key;

  const HttpResponse timed_out = send(order(key, e2e::kOrderBody, kTenant).with("X-Test-Hang", "1"));
  EXPECT_EQ(timed_out.status, 504) << describe(timed_out);
  std::string state;
  EXPECT_TRUE(eventually(
      [&] {
        const HttpResponse inspected = admin_get(admin, record + kOriginalHost, std::nullopt, tenant());
        state = inspected.status == 200 ? string_field(parse_object(inspected), "state").value_or("") : "";
        return state == "unknown";
      },
      std::chrono::seconds(4)))
      << "state: " << state;
  EXPECT_EQ(upstream_count(key), 1u);

  e2e::expect_problem(send(order(key, e2e::kOrderBody, kTenant)), 502, "outcome-unknown");
  EXPECT_EQ(upstream_count(key), 1u);

  const HttpResponse released = admin_post(admin, record + "/release" + kOriginalHost, std::nullopt, tenant());
  EXPECT_EQ(released.status, 200) << describe(released);
  e2e::expect_problem(admin_get(admin, record + kOriginalHost, std::nullopt, tenant()), 404, "not-found");

  const HttpResponse retry = send(order(key, e2e::kOrderBody, kTenant));
  EXPECT_EQ(retry.status, 200) << describe(retry);
  EXPECT_FALSE(e2e::is_replay(retry)) << describe(retry);
  EXPECT_EQ(upstream_count(key), 2u);

  // The timed-out request and the refused retry count as unknown; the released retry as new.
  const std::string metrics = admin_get(admin, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "idemproxy_requests_total{route=\"orders\",decision=\"unknown\"}"), 2.0) << metrics;
  EXPECT_EQ(metric_value(metrics, "idemproxy_requests_total{route=\"orders\",decision=\"new\"}"), 1.0) << metrics;
  EXPECT_EQ(metric_value(metrics, "idemproxy_store_duration_seconds_count{operation=\"mark_unknown\"}"), 1.0)
      << metrics;

  const std::string log = proxy().proxy_process()->stderr_text();
  bool released_ok = false;
  for (const auto& line : events(log, "admin_release")) {
    released_ok |= string_field(line, "key_hash") == key_sha256_prefix(key) && string_field(line, "result") == "ok";
  }
  EXPECT_TRUE(released_ok) << log;
  expect_logged_by_hash(*proxy().proxy_process(), "admin_inspect", key, 2);
}

// Within its lease an in-flight record's request may be running: the admin API refuses to release
// it (409, Retry-After = the lease left), and the request completes and replays, executed once.
TEST_F(OpsAdminKeysUnknownOutcome, ReleaseWithinTheLeaseIsRefusedWithTheLeaseLeft) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  const std::string key = unique_key("in-lease");
  const std::string record = "/admin/keys/orders/" + key;
  auto first = std::async(std::launch::async,
                          [&] { return send(order(key, e2e::kOrderBody, kTenant).with("X-Test-Delay-Ms", "800")); });
  ASSERT_TRUE(eventually([&] { return upstream_count(key) == 1; }, std::chrono::seconds(3)));

  const HttpResponse refused = admin_post(admin, record + "/release" + kOriginalHost, std::nullopt, tenant());
  e2e::expect_problem(refused, 409, "release-refused-in-flight");
  const auto retry_after = refused.header("Retry-After");
  ASSERT_TRUE(retry_after.has_value()) << describe(refused);
  EXPECT_GE(std::stoi(*retry_after), 1);
  EXPECT_LE(std::stoi(*retry_after), 6);  // the 6 s lease

  const HttpResponse answered = first.get();
  EXPECT_EQ(answered.status, 200) << describe(answered);
  const HttpResponse replayed = send(order(key, e2e::kOrderBody, kTenant));
  EXPECT_TRUE(e2e::is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(upstream_count(key), 1u);
}

}  // namespace
}  // namespace idem::test::ops
