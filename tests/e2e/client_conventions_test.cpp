// Keys and replays the way clients really send and read them, against the real binary, real
// Postgres and idem-test-upstream: the replay header spelled as other APIs spell it, the key's
// expiry told to clients, and keys carried in JSON bodies (a Stripe-shaped event, a Standard
// Webhooks delivery, a queue message). Counts come from the upstream itself.
#include <gtest/gtest.h>

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "support/random_hex.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

constexpr std::string_view kConfig = R"(# e2e config rendered by tests/e2e/client_conventions_test.cpp
listen: 127.0.0.1:${PROXY_PORT}
workers: 2
admin: { listen: "127.0.0.1:0" }
upstream: { url: "http://127.0.0.1:${UPSTREAM_PORT}", connect_timeout: 1s, timeout: ${UPSTREAM_TIMEOUT} }
store: { postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
replay_cache: { max_bytes: ${REPLAY_CACHE_BYTES} }
defaults: { ttl: 1h, lease: 10s, scope: { headers: [X-Tenant-Id] } }
routes:
  - name: charges
    match: { method: POST, path: /charges }
    replay_header: [Idempotent-Replay, Idempotent-Replayed]
  - name: plain-orders
    match: { method: POST, path: /orders }
    key: optional
  - name: expiring
    match: { method: POST, path: /expiring }
    key_expires_header: true
    ttl: 2h
  - name: webhooks
    match: { method: POST, path: /webhooks/* }
    key_header: webhook-id
    key_from_json: /id
  - name: queue
    match: { method: POST, path: /queue }
    key_from_json: /message_id
    key_source: json
)";

ProxyOptions conventions_options(std::string replay_cache_bytes = "16MiB") {
  ProxyOptions options;
  options.config_template = std::string(kConfig);
  options.variables = {{"REPLAY_CACHE_BYTES", std::move(replay_cache_bytes)}};
  return options;
}

class ClientConventions : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override { return conventions_options(); }

  // A second proxy on the same Postgres and upstream without an in-process cache: its replays
  // come from Postgres.
  std::unique_ptr<ProxyHarness> start_uncached_proxy() {
    ProxyOptions options = conventions_options("0");
    options.start_upstream = false;
    options.upstream_port = proxy().upstream_port();
    auto harness = std::make_unique<ProxyHarness>(std::move(options));
    harness->start();
    return harness;
  }
};

// "Sun, 06 Nov 1994 08:49:37 GMT" as seconds since the epoch; nullopt when not an IMF-fixdate.
std::optional<std::time_t> parse_http_date(const std::string& text) {
  std::tm parts{};
  const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &parts);
  if (end == nullptr || *end != '\0' || text.size() != 29) return std::nullopt;
  return ::timegm(&parts);
}

HttpRequest charge(std::string_view key) {
  return HttpRequest::post("/charges", R"({"amount":100,"currency":"eur"})")
      .with("Idempotency-Key", std::string(key))
      .with("X-Tenant-Id", "t1");
}

// replay_header lists Stripe's spelling too: both are `true` on every replay and absent from the
// first execution, even when the upstream sets them itself.
TEST_F(ClientConventions, EveryListedReplayHeaderIsTrueOnReplaysOnlyWhateverTheUpstreamSays) {
  const std::string key = unique_key("stripe-replay");
  const auto request = charge(key)
                           .with(std::string(upstream::kAddHeaderHeader), "Idempotent-Replayed: true")
                           .with(std::string(upstream::kAddHeaderHeader), "Idempotent-Replay: true");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_FALSE(first.has_header("Idempotent-Replay")) << describe(first);
  EXPECT_FALSE(first.has_header("Idempotent-Replayed")) << describe(first);

  for (int retry = 0; retry < 2; ++retry) {
    const auto replay = send(request);
    ASSERT_TRUE(replay.ok()) << replay.error;
    EXPECT_EQ(replay.header_values("Idempotent-Replay"), std::vector<std::string>{"true"}) << describe(replay);
    EXPECT_EQ(replay.header_values("Idempotent-Replayed"), std::vector<std::string>{"true"}) << describe(replay);
    expect_same_stored_response(first, replay);
  }
  EXPECT_EQ(upstream_count(key), 1u);
}

// A route's plain answers (key optional, none sent) never carry an upstream's replay header either.
TEST_F(ClientConventions, AnUpstreamsReplayHeaderIsStrippedFromPlainAnswersToo) {
  const auto response =
      send(HttpRequest::post("/orders", "{}").with(std::string(upstream::kAddHeaderHeader), "Idempotent-Replay: true"));
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, 200) << describe(response);
  EXPECT_FALSE(response.has_header("Idempotent-Replay")) << describe(response);
}

// key_expires_header: the first answer and every replay, from the in-process cache and from
// Postgres (a second proxy without a cache), carry the same Idempotency-Key-Expires: the record's
// expiry (its claim plus the route's 2h ttl) as an HTTP-date. (The Redis tier:
// RedisReplayCache.KeyExpiresFromRedisIsTheFirstAnswersValue.)
TEST_F(ClientConventions, KeyExpiresIsTheRecordsExpiryOnTheFirstAnswerAndOnReplaysFromEveryTier) {
  const std::string key = unique_key("expires");
  const auto request = HttpRequest::post("/expiring", "{}")
                           .with("Idempotency-Key", key)
                           .with("X-Tenant-Id", "t1")
                           .with(std::string(upstream::kAddHeaderHeader), "Idempotency-Key-Expires: never");
  const std::time_t before = std::time(nullptr);
  const auto first = send(request);
  const std::time_t after = std::time(nullptr);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  const std::vector<std::string> expires = first.header_values("Idempotency-Key-Expires");
  ASSERT_EQ(expires.size(), 1u) << describe(first);
  const std::optional<std::time_t> at = parse_http_date(expires[0]);
  ASSERT_TRUE(at) << expires[0];
  EXPECT_GE(*at, before + 2 * 3600 - 1) << expires[0];
  EXPECT_LE(*at, after + 2 * 3600) << expires[0];

  const auto from_local_cache = send(request);
  auto uncached = start_uncached_proxy();
  const auto from_postgres = test::send(uncached->proxy_port(), request);
  for (const HttpResponse* replay : {&from_local_cache, &from_postgres}) {
    ASSERT_TRUE(replay->ok()) << replay->error;
    EXPECT_TRUE(is_replay(*replay)) << describe(*replay);
    EXPECT_EQ(replay->header_values("Idempotency-Key-Expires"), expires) << describe(*replay);
    expect_same_stored_response(first, *replay);
  }
  EXPECT_EQ(upstream_count(key), 1u);
  // Other routes (the default) never send it, nor pass the upstream's on.
  const auto other = send(
      charge(unique_key("no-expires")).with(std::string(upstream::kAddHeaderHeader), "Idempotency-Key-Expires: never"));
  EXPECT_FALSE(other.has_header("Idempotency-Key-Expires")) << describe(other);
}

// A Stripe-shaped event: no key header, the event id in the body. Stripe redelivers the same body
// with a new Stripe-Signature (its timestamp changes): one execution, and the redelivery gets the
// first answer's bytes.
TEST_F(ClientConventions, AStripeShapedEventIsKeyedByItsIdAndExecutesOnce) {
  const std::string id = "evt_" + random_hex(24);
  const std::string event =
      R"({"id":")" + id +
      R"(","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded",)"
      R"("data":{"object":{"id":"pi_1","object":"payment_intent","amount":2000,"currency":"usd"}}})";
  const auto delivery = [&](std::string_view signature, std::string body) {
    return HttpRequest::post("/webhooks/stripe", std::move(body))
        .with("Stripe-Signature", std::string(signature))
        .with(std::string(upstream::kStatusHeader), "202");
  };
  const auto first = send(delivery("t=1700000000,v1=aa", event));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 202) << describe(first);
  EXPECT_FALSE(is_replay(first));
  EXPECT_EQ(upstream_total(), 1u);

  const auto redelivered = send(delivery("t=1700000300,v1=bb", event));
  ASSERT_TRUE(redelivered.ok()) << redelivered.error;
  EXPECT_TRUE(is_replay(redelivered)) << describe(redelivered);
  expect_same_stored_response(first, redelivered);
  EXPECT_EQ(upstream_total(), 1u);

  // Another event is another execution.
  const auto next = send(delivery("t=1700000301,v1=cc", R"({"id":"evt_)" + random_hex(24) + R"(","type":"x"})"));
  EXPECT_EQ(next.status, 202) << describe(next);
  EXPECT_FALSE(is_replay(next));
  EXPECT_EQ(upstream_total(), 2u);
}

// A Standard Webhooks delivery: the webhook-id header is the key (the header wins when sent), the
// JSON body has no /id. One execution, the retry replays.
TEST_F(ClientConventions, AStandardWebhooksDeliveryIsKeyedByItsWebhookIdHeader) {
  const std::string id = "msg_" + random_hex(24);
  const auto delivery = [&](std::string_view timestamp, std::string_view signature) {
    return HttpRequest::post("/webhooks/standard",
                             R"({"type":"invoice.paid","timestamp":"2026-11-25T23:00:00Z","data":{"invoice":"in_1"}})")
        .with("webhook-id", id)
        .with("webhook-timestamp", std::string(timestamp))
        .with("webhook-signature", std::string(signature));
  };
  const auto first = send(delivery("1764111600", "v1,AAAA"));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_FALSE(is_replay(first));
  const auto retry = send(delivery("1764111660", "v1,BBBB"));
  EXPECT_TRUE(is_replay(retry)) << describe(retry);
  expect_same_stored_response(first, retry);
  EXPECT_EQ(upstream_webhook_count(id), 1u);
  EXPECT_EQ(upstream_total(), 1u);
}

// key_source: json reads the body only: a key header, whatever it says, does not make another
// request of the same message.
TEST_F(ClientConventions, AQueueMessageIsKeyedByItsBodyWhateverKeyHeaderComesWithIt) {
  const std::string body = R"({"message_id":"m-)" + random_hex(16) + R"(","payload":{"sku":"A1","quantity":2}})";
  const auto first = send(HttpRequest::post("/queue", body).with("Idempotency-Key", unique_key("ignored-1")));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  const auto second = send(HttpRequest::post("/queue", body).with("Idempotency-Key", unique_key("ignored-2")));
  EXPECT_TRUE(is_replay(second)) << describe(second);
  expect_same_stored_response(first, second);
  EXPECT_EQ(upstream_total(), 1u);
}

// A body that holds no usable key gets the header key's 400 family with a detail naming the member;
// a body that is not JSON gets 400 too; none reaches the upstream.
TEST_F(ClientConventions, ABodyWithoutAUsableKeyIs400AndNeverReachesTheUpstream) {
  const auto detail_of = [](const boost::json::object& problem) {
    return string_member(problem, "detail").value_or("");
  };
  auto problem = expect_problem(send(HttpRequest::post("/webhooks/x", R"({"type":"ping"})")), 400, "key-missing");
  EXPECT_NE(detail_of(problem).find("/id"), std::string::npos) << detail_of(problem);
  problem = expect_problem(send(HttpRequest::post("/webhooks/x", R"({"id":42})")), 400, "key-malformed");
  EXPECT_NE(detail_of(problem).find("is a number, not a string"), std::string::npos) << detail_of(problem);
  problem = expect_problem(send(HttpRequest::post("/webhooks/x", R"({"id":""})")), 400, "key-empty");
  problem = expect_problem(send(HttpRequest::post("/webhooks/x", R"({"id":")" + std::string(256, 'k') + R"("})")), 400,
                           "key-too-long");
  problem = expect_problem(send(HttpRequest::post("/webhooks/x", "id=evt_1", "application/x-www-form-urlencoded")), 400,
                           "key-malformed");
  EXPECT_NE(detail_of(problem).find("the body is not JSON"), std::string::npos) << detail_of(problem);
  problem = expect_problem(send(HttpRequest::post("/queue", R"({"message_id":"m-1",)")), 400, "key-malformed");
  EXPECT_EQ(upstream_total(), 0u);
}

}  // namespace
}  // namespace idem::test::e2e
