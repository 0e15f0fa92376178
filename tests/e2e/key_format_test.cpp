// The key's format is the route owner's, and the proxy's problems point at their documentation:
// the real binary, real Postgres and idem-test-upstream, which counts what reached it.
// `key_format`, `min_key_length` (a key that breaks them is 400 key-malformed naming the rule, and
// never reaches the upstream), structured-field parameters on the key, and `problems.docs_url`
// (each problem's type is a link into the documentation; 400 and 422 answers carry a Link).
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "support/eventually.hpp"
#include "support/random_hex.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

constexpr std::string_view kConfig = R"(# e2e config rendered by tests/e2e/key_format_test.cpp
listen: 127.0.0.1:${PROXY_PORT}
workers: 2
admin: { listen: "127.0.0.1:0" }
upstream: { url: "http://127.0.0.1:${UPSTREAM_PORT}", connect_timeout: 1s, timeout: ${UPSTREAM_TIMEOUT} }
store: { postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
${PROBLEMS}
defaults: { ttl: 1h, lease: 10s, scope: { headers: [X-Tenant-Id] } }
routes:
  - name: uuid-orders
    match: { method: POST, path: /orders }
    key_format: uuid
  - name: uuid-events
    match: { method: POST, path: /events }
    key_from_json: /id
    key_source: json
    key_format: uuid
  - name: long-keys
    match: { method: POST, path: /payments }
    min_key_length: 16
  - name: references
    match: { method: POST, path: /references }
    key_format: "regex:ref_[0-9]{6}"
)";

constexpr std::string_view kDocsUrl = "https://docs.example.com/idemproxy/errors";

ProxyOptions options_with(std::string problems_section) {
  ProxyOptions options;
  options.config_template = std::string(kConfig);
  options.variables = {{"PROBLEMS", std::move(problems_section)}};
  return options;
}

// A fresh version-4-shaped UUID in lower case.
std::string random_uuid() {
  const std::string hex = random_hex(32);
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-4" + hex.substr(13, 3) + "-a" + hex.substr(17, 3) + "-" +
         hex.substr(20, 12);
}

HttpRequest order(std::string key_field_value, std::string body = R"({"item":"book"})") {
  return HttpRequest::post("/orders", std::move(body))
      .with("Idempotency-Key", std::move(key_field_value))
      .with("X-Tenant-Id", "t1");
}

std::string detail_of(const boost::json::object& problem) { return string_member(problem, "detail").value_or(""); }

// An RFC 9457 problem whose type is `<docs>#<slug>` (as expect_problem checks the URN form).
boost::json::object expect_documented_problem(const HttpResponse& response, int status, std::string_view slug) {
  EXPECT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, status) << describe(response);
  boost::system::error_code ec;
  auto value = boost::json::parse(response.body, ec);
  if (ec || !value.is_object()) {
    ADD_FAILURE() << "problem body is not a JSON object: " << describe(response);
    return {};
  }
  EXPECT_EQ(string_member(value.as_object(), "type"), std::string(kDocsUrl) + "#" + std::string(slug))
      << describe(response);
  return std::move(value.as_object());
}

std::string link_to(std::string_view slug) {
  return "<" + std::string(kDocsUrl) + "#" + std::string(slug) + ">; rel=\"describedby\"";
}

class KeyFormats : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override { return options_with(""); }
};

TEST_F(KeyFormats, ANonUuidKeyIs400NamingTheRuleAndNeverReachesTheUpstream) {
  for (const std::string& key : {unique_key("not-a-uuid"), random_uuid().substr(1), "{" + random_uuid() + "}"}) {
    const auto problem = expect_problem(send(order(key)), 400, "key-malformed");
    EXPECT_EQ(detail_of(problem),
              "the Idempotency-Key header must be a UUID (8-4-4-4-12 hexadecimal digits, e.g. "
              "0190b4a2-6f0e-7c3a-9d1e-3b5f8a2c4d6e)")
        << key;
    EXPECT_EQ(upstream_count(key), 0u) << key;
  }
  EXPECT_EQ(upstream_total(), 0u);
}

// Structured-field parameters are part of the field, not of the key: the same record.
TEST_F(KeyFormats, AUuidKeyIsExecutedOnceAndReplayedWithOrWithoutParameters) {
  const std::string key = random_uuid();
  const auto first = send(order(key));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_FALSE(is_replay(first)) << describe(first);

  for (const std::string& field : {key, "\"" + key + "\"", "\"" + key + "\";p=1", key + ";attempt=2;x"}) {
    const auto retry = send(order(field));
    ASSERT_TRUE(retry.ok()) << retry.error;
    EXPECT_TRUE(is_replay(retry)) << field << ": " << describe(retry);
    expect_same_stored_response(first, retry);
  }
  const std::string upper = random_uuid();
  std::string shouted = upper;
  for (char& c : shouted) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(send(order(shouted)).status, 200) << "either case is a UUID";
  EXPECT_EQ(upstream_count(key), 1u);
  // A list is still several keys, parameters or not.
  expect_problem(send(order("\"" + key + "\";p=1, \"" + random_uuid() + "\"")), 400, "key-multiple");
  EXPECT_EQ(upstream_total(), 2u);
}

TEST_F(KeyFormats, ABodyKeyThatIsNotAUuidIs400NamingTheMember) {
  const std::string id = unique_key("evt");
  const auto problem = expect_problem(
      send(HttpRequest::post("/events", R"({"id":")" + id + R"(","type":"ping"})").with("X-Tenant-Id", "t1")), 400,
      "key-malformed");
  EXPECT_EQ(detail_of(problem),
            "the JSON body's /id (the idempotency key) must be a UUID (8-4-4-4-12 hexadecimal digits, e.g. "
            "0190b4a2-6f0e-7c3a-9d1e-3b5f8a2c4d6e)");
  const std::string uuid = random_uuid();
  const auto body = R"({"id":")" + uuid + R"(","type":"ping"})";
  const auto first = send(HttpRequest::post("/events", body).with("X-Tenant-Id", "t1"));
  EXPECT_EQ(first.status, 200) << describe(first);
  EXPECT_TRUE(is_replay(send(HttpRequest::post("/events", body).with("X-Tenant-Id", "t1"))));
  EXPECT_EQ(upstream_total(), 1u);
}

TEST_F(KeyFormats, AShortKeyOrOneOutsideTheRegexIs400NamingTheRule) {
  const auto short_key = expect_problem(
      send(HttpRequest::post("/payments", "{}").with("Idempotency-Key", "k-" + random_hex(8)).with("X-Tenant-Id", "t")),
      400, "key-malformed");
  EXPECT_EQ(detail_of(short_key), "the Idempotency-Key header must be at least 16 characters long");
  const auto outside = expect_problem(
      send(HttpRequest::post("/references", "{}").with("Idempotency-Key", "ref_12345x").with("X-Tenant-Id", "t")), 400,
      "key-malformed");
  EXPECT_EQ(detail_of(outside), "the Idempotency-Key header must match the regular expression ref_[0-9]{6}");
  EXPECT_EQ(upstream_total(), 0u);

  const std::string long_key = unique_key("long-enough");
  EXPECT_EQ(
      send(HttpRequest::post("/payments", "{}").with("Idempotency-Key", long_key).with("X-Tenant-Id", "t")).status,
      200);
  const std::string reference = "ref_" + std::to_string(100000 + std::stoul(random_hex(4), nullptr, 16));
  const auto matching =
      send(HttpRequest::post("/references", "{}").with("Idempotency-Key", reference).with("X-Tenant-Id", "t"));
  EXPECT_TRUE(matching.status == 200) << describe(matching);
  EXPECT_EQ(upstream_count(long_key), 1u);
}

// Unset problems.docs_url: types stay URNs (expect_problem checks them), no Link anywhere.
TEST_F(KeyFormats, WithoutDocsUrlTypesAreUrnsAndNothingLinks) {
  const auto missing = send(HttpRequest::post("/orders", "{}").with("X-Tenant-Id", "t1"));
  expect_problem(missing, 400, "key-missing");
  EXPECT_FALSE(missing.has_header("Link")) << describe(missing);

  const std::string key = random_uuid();
  ASSERT_EQ(send(order(key)).status, 200);
  const auto mismatch = send(order(key, R"({"item":"pen"})"));
  expect_problem(mismatch, 422, "fingerprint-mismatch");
  EXPECT_FALSE(mismatch.has_header("Link")) << describe(mismatch);
}

class DocumentedProblems : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    return options_with("problems: { docs_url: \"" + std::string(kDocsUrl) + "\" }");
  }
};

TEST_F(DocumentedProblems, TypesLinkToTheDocsAndOnlyA400OrA422CarriesALinkField) {
  const auto malformed = send(order("not-a-uuid"));
  const auto problem = expect_documented_problem(malformed, 400, "key-malformed");
  EXPECT_NE(detail_of(problem).find("must be a UUID"), std::string::npos) << detail_of(problem);
  EXPECT_EQ(malformed.header_values("Link"), std::vector<std::string>{link_to("key-malformed")}) << describe(malformed);

  const std::string key = random_uuid();
  ASSERT_EQ(send(order(key)).status, 200);
  const auto mismatch = send(order(key, R"({"item":"pen"})"));
  expect_documented_problem(mismatch, 422, "fingerprint-mismatch");
  EXPECT_EQ(mismatch.header_values("Link"), std::vector<std::string>{link_to("fingerprint-mismatch")})
      << describe(mismatch);

  // A 409: its type is documented too, but the draft asks a Link of 400 and 422 only.
  const std::string slow = random_uuid();
  auto first = std::async(std::launch::async,
                          [&] { return send(order(slow).with(std::string(upstream::kDelayHeader), "1500")); });
  ASSERT_TRUE(eventually([&] { return upstream_count(slow) == 1; }, std::chrono::seconds(5)))
      << "the first request never reached the upstream";
  const auto in_flight = send(order(slow).with(std::string(upstream::kDelayHeader), "1500"));
  expect_documented_problem(in_flight, 409, "request-in-flight");
  EXPECT_FALSE(in_flight.has_header("Link")) << describe(in_flight);
  EXPECT_EQ(first.get().status, 200);
  EXPECT_EQ(upstream_count(slow), 1u);
  EXPECT_EQ(upstream_count("not-a-uuid"), 0u);
}

// problems.docs_url is reloaded: a SIGHUP with it removed brings the URN types back.
TEST_F(DocumentedProblems, AReloadWithoutDocsUrlBringsTheUrnsBack) {
  expect_documented_problem(send(order("not-a-uuid")), 400, "key-malformed");
  std::string text = proxy().config_text();
  const std::string section = "problems: { docs_url: \"" + std::string(kDocsUrl) + "\" }";
  ASSERT_NE(text.find(section), std::string::npos) << text;
  text.erase(text.find(section), section.size());
  std::ofstream(proxy().config_path(), std::ios::trunc) << text;
  ASSERT_TRUE(proxy().proxy_process()->signal(SIGHUP));
  std::optional<HttpResponse> after;
  ASSERT_TRUE(eventually(
      [&] {
        after = send(order("not-a-uuid"));
        return after->body.find("urn:idemproxy:problem:key-malformed") != std::string::npos;
      },
      std::chrono::seconds(5), std::chrono::milliseconds(100)))
      << (after ? describe(*after) : std::string());
  expect_problem(*after, 400, "key-malformed");
  EXPECT_FALSE(after->has_header("Link")) << describe(*after);
}

}  // namespace
}  // namespace idem::test::e2e
