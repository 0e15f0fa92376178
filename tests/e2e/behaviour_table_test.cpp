// The behaviour table of the README, row by row, against the real binary, real Postgres and
// idem-test-upstream. Each test names the row it proves; counts come from the upstream itself.
#include <gtest/gtest.h>

#include <charconv>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

using BehaviourTable = ProxyTest;

// Polls until the upstream has received `expected` requests with this key (bounded).
bool wait_for_upstream_count(ProxyHarness& proxy, std::string_view key, std::uint64_t expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (proxy.upstream_count(key) < expected) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Row "new key": the upstream's response is passed through and the key header is forwarded
// upstream; one execution.
TEST_F(BehaviourTable, NewKeyExecutesOnceAndPassesTheUpstreamResponseThrough) {
  const std::string key = unique_key("new");
  const auto response = send(order(key).with("X-Test-Status", "201").with("X-Test-Header", "X-Custom: first"));
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, 201) << describe(response);
  EXPECT_EQ(response.header("X-Custom"), "first");
  EXPECT_EQ(response.header("X-Execution"), "1");
  EXPECT_EQ(response.header("Content-Type"), "application/json");
  EXPECT_FALSE(response.has_header("Idempotent-Replay"));
  const auto body = upstream_json(response);
  EXPECT_EQ(string_member(body, "key"), key) << "the upstream must receive the Idempotency-Key header";
  EXPECT_EQ(string_member(body, "method"), "POST");
  EXPECT_EQ(string_member(body, "target"), "/orders");
  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_EQ(upstream_total(), 1u);
}

// Row "same key + same fingerprint, completed": stored status, headers and body byte-identical,
// plus Idempotent-Replay: true; zero further executions.
TEST_F(BehaviourTable, SameKeyAndFingerprintReplaysTheStoredResponse) {
  const std::string key = unique_key("replay");
  const auto request = order(key).with("X-Test-Status", "201").with("X-Test-Header", "X-Custom: stored");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 201) << describe(first);
  EXPECT_FALSE(first.has_header("Idempotent-Replay"));

  for (int retry = 0; retry < 3; ++retry) {
    const auto replay = send(request);
    ASSERT_TRUE(replay.ok()) << replay.error;
    EXPECT_TRUE(is_replay(replay)) << describe(replay);
    EXPECT_EQ(replay.header_values("Idempotent-Replay").size(), 1u);
    expect_same_stored_response(first, replay);
  }
  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_EQ(upstream_total(), 1u);
}

// Row "same key + same fingerprint": JSON bodies are canonicalized (JCS), so key order and
// insignificant whitespace do not make a different payload.
TEST_F(BehaviourTable, ReorderedJsonKeysAndWhitespaceStillReplay) {
  const std::string key = unique_key("jcs");
  const auto first = send(order(key, R"({"item":"book","quantity":1,"note":{"a":1,"b":[1,2]}})"));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  const auto replay = send(order(key, "{\n  \"note\" : { \"b\" : [ 1, 2 ], \"a\" : 1 },\n  \"quantity\": 1,\n  \"item\": \"book\"\n}\n"));
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);
}

// Row "same key + same fingerprint": the refunds route ignores /client_timestamp, and only it —
// a different amount is still a different payload.
TEST_F(BehaviourTable, RefundsRouteIgnoresClientTimestampOnly) {
  const std::string key = unique_key("refund");
  const auto refund = [&](std::string_view body) {
    return HttpRequest::post("/orders/42/refunds", std::string(body)).with("Idempotency-Key", key).with("X-Tenant-Id", "t1");
  };
  const auto first = send(refund(R"({"amount":500,"client_timestamp":"2024-05-01T10:00:00Z"})"));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(string_member(upstream_json(first), "target"), "/orders/42/refunds");

  const auto replay = send(refund(R"({"client_timestamp":"2024-05-01T10:00:07Z","amount":500})"));
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);

  const auto different = send(refund(R"({"amount":501,"client_timestamp":"2024-05-01T10:00:00Z"})"));
  expect_problem(different, 422, "fingerprint-mismatch");
  EXPECT_EQ(upstream_count(key), 1u);
}

// Row "same key + different fingerprint": 422 problem+json, no execution.
TEST_F(BehaviourTable, SameKeyDifferentBodyIs422FingerprintMismatch) {
  const std::string key = unique_key("mismatch");
  const auto first = send(order(key, R"({"item":"book","quantity":1})"));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  const auto second = send(order(key, R"({"item":"book","quantity":2})"));
  expect_problem(second, 422, "fingerprint-mismatch");
  EXPECT_FALSE(second.has_header("Idempotent-Replay"));
  EXPECT_EQ(upstream_count(key), 1u);
}

// Row "same key + different fingerprint": JSON numbers count by their exact value (fingerprint
// v2). Two 20-digit account numbers one IEEE double holds are two requests, as they are to a Java,
// Go or Python upstream; the same value spelled differently is the same request.
TEST_F(BehaviourTable, SameKeyAndAnAccountNumberThatDiffersBeyondDoublePrecisionIs422) {
  const std::string key = unique_key("account");
  const auto first = send(order(key, R"({"account":12345678901234567890})"));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  expect_problem(send(order(key, R"({"account":12345678901234567891})")), 422, "fingerprint-mismatch");
  const auto respelled = send(order(key, R"({ "account" : 1234567890123456789e1 })"));
  EXPECT_TRUE(is_replay(respelled)) << describe(respelled);
  EXPECT_EQ(respelled.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);
}

// Row "same key + different fingerprint": the query string is part of the fingerprint.
TEST_F(BehaviourTable, SameKeyDifferentQueryStringIs422) {
  const std::string key = unique_key("query");
  auto first_request = order(key);
  first_request.target = "/orders?priority=low";
  const auto first = send(first_request);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  auto second_request = order(key);
  second_request.target = "/orders?priority=high";
  expect_problem(send(second_request), 422, "fingerprint-mismatch");
  EXPECT_EQ(upstream_count(key), 1u);
}

// Row "same key while the first is still in flight": 409 problem+json with Retry-After; no
// execution. Once the first completes, the retry replays it.
TEST_F(BehaviourTable, SameKeyWhileInFlightIs409WithRetryAfter) {
  const std::string key = unique_key("inflight");
  const auto request = order(key).with("X-Test-Delay-Ms", "1500");
  auto first = std::async(std::launch::async, [&] { return send(request); });
  ASSERT_TRUE(wait_for_upstream_count(proxy(), key, 1)) << "the first request never reached the upstream";

  const auto concurrent = send(request);
  expect_problem(concurrent, 409, "request-in-flight");
  const auto retry_after = concurrent.header("Retry-After");
  ASSERT_TRUE(retry_after.has_value()) << describe(concurrent);
  int seconds = 0;
  const auto [end, ec] = std::from_chars(retry_after->data(), retry_after->data() + retry_after->size(), seconds);
  EXPECT_TRUE(ec == std::errc{} && end == retry_after->data() + retry_after->size() && seconds >= 1)
      << "Retry-After must be an integer >= 1, got '" << *retry_after << "'";

  const auto original = first.get();
  ASSERT_TRUE(original.ok()) << original.error;
  EXPECT_EQ(original.status, 200) << describe(original);
  EXPECT_FALSE(original.has_header("Idempotent-Replay"));
  const auto after = send(request);
  EXPECT_TRUE(is_replay(after)) << describe(after);
  EXPECT_EQ(after.body, original.body);
  EXPECT_EQ(upstream_count(key), 1u);
}

// Row "route requires a key and it is missing, empty, too long or malformed": 400 problem+json
// naming the problem; the upstream is never called.
struct InvalidKeyCase {
  const char* name;
  std::vector<std::string> key_values;  // one Idempotency-Key header per value; none = missing
  const char* slug;
};

void PrintTo(const InvalidKeyCase& invalid, std::ostream* out) { *out << invalid.name; }

class InvalidKey : public ProxyTest, public ::testing::WithParamInterface<InvalidKeyCase> {};

TEST_P(InvalidKey, IsRejectedWith400AndNeverReachesTheUpstream) {
  const auto& param = GetParam();
  auto request = HttpRequest::post("/orders", std::string(kOrderBody)).with("X-Tenant-Id", "t1");
  for (const auto& value : param.key_values) request.with("Idempotency-Key", value);
  const auto response = send(request);
  expect_problem(response, 400, param.slug);
  EXPECT_EQ(upstream_total(), 0u);
  // The bound refuses that request only: the next valid one is served.
  const std::string key = unique_key("after-invalid");
  EXPECT_EQ(send(order(key)).status, 200);
  EXPECT_EQ(upstream_count(key), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    BehaviourTable, InvalidKey,
    ::testing::Values(InvalidKeyCase{"Missing", {}, "key-missing"},
                      InvalidKeyCase{"Empty", {""}, "key-empty"},
                      InvalidKeyCase{"EmptyQuotedString", {"\"\""}, "key-empty"},
                      InvalidKeyCase{"TooLong256", {std::string(256, 'k')}, "key-too-long"},
                      InvalidKeyCase{"Unterminated", {"\"unterminated"}, "key-malformed"},
                      InvalidKeyCase{"SpaceInBareToken", {"two words"}, "key-malformed"},
                      InvalidKeyCase{"TwoHeaders", {"key-one", "key-two"}, "key-multiple"},
                      InvalidKeyCase{"ListValue", {"\"key-one\", \"key-two\""}, "key-multiple"}),
    [](const ::testing::TestParamInfo<InvalidKeyCase>& info) { return std::string(info.param.name); });

// Row "too long (>255 by default)": 255 characters is still a valid key.
TEST_F(BehaviourTable, KeyOfExactly255CharactersIsAccepted) {
  std::string key = unique_key("max");
  key.append(255 - key.size(), 'x');
  const auto response = send(order(key));
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, 200) << describe(response);
  EXPECT_EQ(upstream_count(key), 1u);
}

// Key syntax: the quoted sf-string form and the bare token form name the same key.
TEST_F(BehaviourTable, QuotedAndBareKeyAreTheSameKey) {
  const std::string key = unique_key("form");
  const auto quoted = send(order("\"" + key + "\""));
  ASSERT_TRUE(quoted.ok()) << quoted.error;
  ASSERT_EQ(quoted.status, 200) << describe(quoted);
  EXPECT_FALSE(quoted.has_header("Idempotent-Replay"));
  const auto bare = send(order(key));
  ASSERT_TRUE(bare.ok()) << bare.error;
  EXPECT_TRUE(is_replay(bare)) << describe(bare);
  EXPECT_EQ(bare.body, quoted.body);
  EXPECT_EQ(upstream_total(), 1u);
}

// Row "route has the key optional and none is sent": plain proxying, every request executes.
TEST_F(BehaviourTable, OptionalKeyRouteWithoutKeyProxiesEveryRequest) {
  const auto request = HttpRequest::post("/webhooks/stripe", R"({"event":"paid"})");
  const auto first = send(request);
  const auto second = send(request);
  ASSERT_TRUE(first.ok() && second.ok()) << first.error << second.error;
  EXPECT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(second.status, 200) << describe(second);
  EXPECT_FALSE(first.has_header("Idempotent-Replay"));
  EXPECT_FALSE(second.has_header("Idempotent-Replay"));
  EXPECT_NE(execution_of(first), execution_of(second));
  EXPECT_EQ(upstream_total(), 2u);
}

// Rows "new key" / "same key + same fingerprint" with a configured key header: webhook-id
// deduplicates inbound webhook deliveries.
TEST_F(BehaviourTable, WebhookIdDeduplicatesDeliveries) {
  const std::string id = unique_key("evt");
  const auto delivery = HttpRequest::post("/webhooks/stripe", R"({"event":"paid"})").with("webhook-id", id);
  const auto first = send(delivery);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(string_member(upstream_json(first), "webhook_id"), id);
  const auto redelivery = send(delivery);
  ASSERT_TRUE(redelivery.ok()) << redelivery.error;
  EXPECT_TRUE(is_replay(redelivery)) << describe(redelivery);
  EXPECT_EQ(redelivery.body, first.body);
  EXPECT_EQ(upstream_webhook_count(id), 1u);
}

// Row "the route is off": plain proxying even with a key; no replay header.
TEST_F(BehaviourTable, OffRouteProxiesEveryRequestEvenWithAKey) {
  const std::string key = unique_key("off");
  const auto request = HttpRequest::post("/plain/things", R"({"a":1})").with("Idempotency-Key", key);
  const auto first = send(request);
  const auto second = send(request);
  ASSERT_TRUE(first.ok() && second.ok()) << first.error << second.error;
  EXPECT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(second.status, 200) << describe(second);
  EXPECT_FALSE(first.has_header("Idempotent-Replay"));
  EXPECT_FALSE(second.has_header("Idempotent-Replay"));
  EXPECT_EQ(upstream_count(key), 2u);
}

// Row "the method is GET/HEAD/OPTIONS": plain proxying on a guarded path, as sent.
class SafeMethod : public ProxyTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(SafeMethod, IsProxiedEveryTimeWithoutReplay) {
  const std::string key = unique_key("safe");
  HttpRequest request;
  request.method = GetParam();
  request.target = "/orders";
  request.with("Idempotency-Key", key).with("X-Tenant-Id", "t1");
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const auto response = send(request);
    ASSERT_TRUE(response.ok()) << response.error;
    EXPECT_EQ(response.status, 200) << describe(response);
    EXPECT_FALSE(response.has_header("Idempotent-Replay")) << describe(response);
    EXPECT_EQ(response.header("X-Execution"), std::to_string(attempt));
  }
  EXPECT_EQ(upstream_count(key), 3u);
}

INSTANTIATE_TEST_SUITE_P(BehaviourTable, SafeMethod, ::testing::Values("GET", "HEAD", "OPTIONS"));

// Row "upstream answers a 'not processed, try later' status" (default 408, 425, 429, 503): passed
// through, the record is deleted, the next retry executes again and its outcome is stored.
class ReleaseStatus : public ProxyTest, public ::testing::WithParamInterface<int> {};

TEST_P(ReleaseStatus, IsPassedThroughAndTheRetryExecutesAgain) {
  const int status = GetParam();
  const std::string key = unique_key("release");
  const auto failed = send(order(key).with("X-Test-Status", std::to_string(status)));
  ASSERT_TRUE(failed.ok()) << failed.error;
  EXPECT_EQ(failed.status, status) << describe(failed);
  EXPECT_EQ(execution_of(failed), 1) << "the upstream's body must be passed through";
  EXPECT_FALSE(failed.has_header("Idempotent-Replay"));

  // Same key, same fingerprint (X-Test-Status is not fingerprinted): executes again.
  const auto retried = send(order(key));
  ASSERT_TRUE(retried.ok()) << retried.error;
  EXPECT_EQ(retried.status, 200) << describe(retried);
  EXPECT_FALSE(retried.has_header("Idempotent-Replay"));
  EXPECT_EQ(execution_of(retried), 2);

  const auto replay = send(order(key));
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, retried.body);
  EXPECT_EQ(upstream_count(key), 2u);
}

INSTANTIATE_TEST_SUITE_P(BehaviourTable, ReleaseStatus, ::testing::Values(503, 429, 408, 425));

// Row "Idempotency-Transient: true": releases a 200 (the retry executes again); the header never
// reaches the client.
TEST_F(BehaviourTable, TransientTrueReleasesASuccessAndIsStripped) {
  const std::string key = unique_key("transient");
  const auto request = order(key).with("X-Test-Header", "Idempotency-Transient: true");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 200) << describe(first);
  EXPECT_FALSE(first.has_header("Idempotency-Transient")) << describe(first);
  const auto second = send(request);
  ASSERT_TRUE(second.ok()) << second.error;
  EXPECT_EQ(second.status, 200) << describe(second);
  EXPECT_FALSE(second.has_header("Idempotent-Replay")) << describe(second);
  EXPECT_FALSE(second.has_header("Idempotency-Transient"));
  EXPECT_EQ(upstream_count(key), 2u);
}

// Row "Idempotency-Transient: false": stores a 503 that the status rule would have released; the
// header is stripped from the first response and from the replay.
TEST_F(BehaviourTable, TransientFalseStoresA503AndIsStripped) {
  const std::string key = unique_key("final503");
  const auto request = order(key).with("X-Test-Status", "503").with("X-Test-Header", "Idempotency-Transient: false");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 503) << describe(first);
  EXPECT_FALSE(first.has_header("Idempotency-Transient")) << describe(first);
  const auto replay = send(request);
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_EQ(replay.status, 503) << describe(replay);
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_FALSE(replay.has_header("Idempotency-Transient"));
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);
}

// Row "every other status (2xx, 4xx, 500...)": stored and replayed, one execution.
class StoredStatus : public ProxyTest, public ::testing::WithParamInterface<int> {};

TEST_P(StoredStatus, IsStoredAndReplayed) {
  const int status = GetParam();
  const std::string key = unique_key("stored");
  const auto request = order(key).with("X-Test-Status", std::to_string(status));
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, status) << describe(first);
  const auto replay = send(request);
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  expect_same_stored_response(first, replay);
  EXPECT_EQ(upstream_count(key), 1u);
}

INSTANTIATE_TEST_SUITE_P(BehaviourTable, StoredStatus, ::testing::Values(500, 400, 202, 404));

// "What is stored": Set-Cookie reaches the first client but is not stored, so no replay carries it.
TEST_F(BehaviourTable, SetCookieIsNotStoredForReplay) {
  const std::string key = unique_key("cookie");
  const auto request =
      order(key).with("X-Test-Header", "Set-Cookie: session=abc; HttpOnly").with("X-Test-Header", "X-Custom: kept");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.header("Set-Cookie"), "session=abc; HttpOnly") << describe(first);
  const auto replay = send(request);
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_FALSE(replay.has_header("Set-Cookie")) << describe(replay);
  EXPECT_EQ(replay.header("X-Custom"), "kept");
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);
}

// "What is stored": a response over the route's max_stored_body reaches the first client whole;
// retries get 409 naming the original status, never a second execution.
TEST_F(BehaviourTable, ResponseTooLargeToStoreIs409OnRetry) {
  const std::string key = unique_key("large");
  const auto request = HttpRequest::post("/small", std::string(kOrderBody))
                           .with("Idempotency-Key", key)
                           .with("X-Tenant-Id", "t1")
                           .with("X-Test-Status", "201")
                           .with(std::string(upstream::kBodySizeHeader), "2048");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 201) << describe(first);
  EXPECT_EQ(first.body, upstream::pattern_body(2048));

  const auto retry = send(request);
  const auto problem = expect_problem(retry, 409, "response-too-large-to-replay");
  EXPECT_NE(string_member(problem, "detail").value_or("").find("201"), std::string::npos)
      << "the detail must name the original status: " << retry.body;
  EXPECT_EQ(upstream_count(key), 1u);
}

// "Scope": the same key and body from two tenants are two records, each replaying its own
// response.
TEST_F(BehaviourTable, TenantsNeverShareRecords) {
  const std::string key = unique_key("tenant");
  const auto a = send(order(key, kOrderBody, "tenant-a"));
  const auto b = send(order(key, kOrderBody, "tenant-b"));
  ASSERT_TRUE(a.ok() && b.ok()) << a.error << b.error;
  ASSERT_EQ(a.status, 200) << describe(a);
  ASSERT_EQ(b.status, 200) << describe(b);
  EXPECT_FALSE(b.has_header("Idempotent-Replay")) << "tenant b must not see tenant a's response";
  EXPECT_NE(execution_of(a), execution_of(b));

  const auto replay_a = send(order(key, kOrderBody, "tenant-a"));
  const auto replay_b = send(order(key, kOrderBody, "tenant-b"));
  EXPECT_TRUE(is_replay(replay_a)) << describe(replay_a);
  EXPECT_TRUE(is_replay(replay_b)) << describe(replay_b);
  EXPECT_EQ(replay_a.body, a.body);
  EXPECT_EQ(replay_b.body, b.body);
  EXPECT_EQ(upstream_count(key), 2u);
}

// "Scope": the same key on two routes is two independent records.
TEST_F(BehaviourTable, SameKeyOnTwoRoutesIsTwoRecords) {
  const std::string key = unique_key("routes");
  const auto on_orders = send(order(key));
  const auto on_small = send(HttpRequest::post("/small", std::string(kOrderBody)).with("Idempotency-Key", key).with("X-Tenant-Id", "t1"));
  ASSERT_TRUE(on_orders.ok() && on_small.ok()) << on_orders.error << on_small.error;
  EXPECT_EQ(on_orders.status, 200) << describe(on_orders);
  EXPECT_EQ(on_small.status, 200) << describe(on_small);
  EXPECT_FALSE(on_small.has_header("Idempotent-Replay"));
  EXPECT_EQ(upstream_count(key), 2u);
  EXPECT_EQ(send(order(key)).body, on_orders.body);
}

}  // namespace
}  // namespace idem::test::e2e
