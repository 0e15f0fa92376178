// The Redis replay cache end to end: two real idemproxy processes sharing Postgres and Redis
// (proxy A executes, proxy B replays), against the suite's Redis or a private redis-server the
// test kills, pauses and restarts. Every check is on what clients, the upstream, Redis and the
// proxies' /metrics see.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"
#include "support/eventually.hpp"
#include "support/private_redis.hpp"
#include "support/process.hpp"
#include "support/proxy_fixture.hpp"
#include "support/redis_client.hpp"
#include "support/temp_dir.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Both proxies use this; ${...} filled per test (see Settings). The store's timeouts are below
// their defaults so that leases stay short: the timing model's shortest lease here is
// 2 × query 1s + acquire 500ms + connect 1s + upstream 400ms + margin 1s = 4.9s. The `short`
// route's records live only just past that lease (kShortTtl), so in their last seconds they are
// no longer worth copying to Redis.
constexpr std::string_view kConfigTemplate = R"(# e2e config rendered by tests/e2e/redis/redis_cache_test.cpp
listen: 127.0.0.1:${PROXY_PORT}
workers: 2
admin: { listen: "127.0.0.1:0" }
upstream: { url: "http://127.0.0.1:${UPSTREAM_PORT}", connect_timeout: 1s, timeout: 400ms }
store:
  postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms }
  redis:
    address: "127.0.0.1:${REDIS_PORT}"
    password: "${REDIS_PASSWORD}"
    database: ${REDIS_DATABASE}
    connect_timeout: 300ms
    timeout: ${REDIS_TIMEOUT}
    key_prefix: "${REDIS_PREFIX}"
    max_value_bytes: ${REDIS_MAX_VALUE}
${ENCRYPTION}
replay_cache: { max_bytes: ${REPLAY_CACHE_BYTES} }
defaults: { ttl: 1h, lease: 10s }
routes:
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
  - name: transient
    match: { method: POST, path: /transient }
    release_statuses: [503]
  - name: short
    match: { method: POST, path: /short }
    lease: 5s
    ttl: 5500ms
  - name: expiring
    match: { method: POST, path: /expiring }
    key_expires_header: true
limits: { max_request_body: 1MiB }
)";
constexpr auto kShortTtl = 5500ms;  // the `short` route's ttl

constexpr std::string_view kEncryption = R"(  encryption:
    current_key: k1
    keys:
      - { id: k1, env: IDEM_E2E_RECORD_KEY }
)";
constexpr std::string_view kRecordKeyHex = "5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

struct Settings {
  std::uint16_t redis_port = 0;
  std::string prefix = unique_prefix("e2e-redis");
  std::string password;
  unsigned database = 0;
  // Generous, so that a loaded test machine does not turn the hits these tests count into
  // timeouts; the deadline itself is tested with a paused server.
  std::string timeout = "250ms";
  std::string max_value = "1MiB";
  bool encryption = false;
  std::string replay_cache_bytes = "16MiB";
};

double metric_in(std::string_view exposition, std::string_view series) {
  return ops::metric_value(exposition, series).value_or(0.0);
}

// One idemproxy of the pair, with its admin port and /metrics at hand.
class Proxy {
 public:
  Proxy(const Settings& settings, std::optional<std::uint16_t> upstream_port) {
    ProxyOptions options;
    options.config_template = std::string(kConfigTemplate);
    options.variables = {{"REDIS_PORT", std::to_string(settings.redis_port)},
                         {"REDIS_PASSWORD", settings.password},
                         {"REDIS_DATABASE", std::to_string(settings.database)},
                         {"REDIS_TIMEOUT", settings.timeout},
                         {"REDIS_PREFIX", settings.prefix},
                         {"REDIS_MAX_VALUE", settings.max_value},
                         {"ENCRYPTION", settings.encryption ? std::string(kEncryption) : std::string()},
                         {"REPLAY_CACHE_BYTES", settings.replay_cache_bytes}};
    if (settings.encryption) options.env = {{"IDEM_E2E_RECORD_KEY", std::string(kRecordKeyHex)}};
    if (upstream_port) {
      options.start_upstream = false;
      options.upstream_port = *upstream_port;
    }
    harness_ = std::make_unique<ProxyHarness>(std::move(options));
    harness_->start();
    admin_port_ = ops::admin_port_of(*harness_->proxy_process());
  }

  HttpResponse send(const HttpRequest& request) { return test::send(harness_->proxy_port(), request); }
  std::string metrics() { return ops::admin_get(admin_port_, "/metrics").body; }
  double metric(std::string_view series) { return metric_in(metrics(), series); }
  double redis_hits() { return metric("idemproxy_redis_cache_hits_total"); }
  double redis_writes() { return metric("idemproxy_redis_cache_writes_total"); }
  double fallbacks(std::string_view reason) {
    return metric("idemproxy_redis_cache_fallbacks_total{reason=\"" + std::string(reason) + "\"}");
  }
  double claims() { return metric("idemproxy_store_duration_seconds_count{operation=\"claim\"}"); }
  bool redis_up() { return metric("idemproxy_redis_up") == 1.0; }
  ProxyHarness& harness() { return *harness_; }
  std::uint16_t admin_port() const { return admin_port_; }

 private:
  std::unique_ptr<ProxyHarness> harness_;
  std::uint16_t admin_port_ = 0;
};

class RedisReplayCache : public ::testing::Test {
 protected:
  // Proxy A with its own upstream; proxy B in front of the same upstream.
  void start_pair() {
    a_.emplace(settings_, std::nullopt);
    b_.emplace(settings_, a_->harness().upstream_port());
    ASSERT_TRUE(eventually([&] { return a_->redis_up() && b_->redis_up(); }, 10s)) << a_->metrics() << b_->metrics();
  }
  void TearDown() override {
    if (HasFailure()) {
      if (a_) std::cerr << "=== proxy A ===\n" << a_->harness().diagnostics();
      if (b_) std::cerr << "=== proxy B ===\n" << b_->harness().diagnostics();
      if (private_redis_) std::cerr << private_redis_->describe();
    }
    b_.reset();
    a_.reset();
  }
  void use_private_redis(std::vector<std::string> extra_args = {}) {
    private_redis_.emplace(redis_dir_.path(), std::move(extra_args));
    settings_.redis_port = private_redis_->port();
  }
  // A executes a new key; returns its response once Redis acknowledged the copy.
  HttpResponse execute_on_a(const std::string& key, std::string_view body = kOrderBody) {
    const double writes = a_->redis_writes();
    HttpResponse first = a_->send(order(key, body));
    EXPECT_EQ(first.status, 200) << describe(first);
    EXPECT_FALSE(is_replay(first));
    EXPECT_TRUE(eventually([&] { return a_->redis_writes() >= writes + 1; }, 5s)) << a_->metrics();
    return first;
  }
  std::vector<std::string> redis_keys(RedisClient& client) { return client.keys(settings_.prefix + "*"); }

  void SetUp() override { settings_.redis_port = suite_redis_port(); }

  Settings settings_;
  TempDir redis_dir_{"idem-e2e-redis"};
  std::optional<PrivateRedis> private_redis_;
  std::optional<Proxy> a_;
  std::optional<Proxy> b_;
};

// (a) A executes, B replays from Redis: no claim on B, one upstream execution, the same bytes.
TEST_F(RedisReplayCache, SecondProxyReplaysFromRedisWithoutAClaim) {
  start_pair();
  const std::string key = unique_key("redis-share");
  const HttpResponse first = execute_on_a(key);
  const double b_claims = b_->claims();

  const HttpResponse replay = b_->send(order(key));
  ASSERT_EQ(replay.status, 200) << describe(replay);
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  expect_same_stored_response(first, replay);
  EXPECT_EQ(a_->harness().upstream_count(key), 1u);

  std::string b_metrics = b_->metrics();
  EXPECT_EQ(metric_in(b_metrics, "idemproxy_redis_cache_hits_total"), 1.0) << b_metrics;
  EXPECT_EQ(metric_in(b_metrics, "idemproxy_store_duration_seconds_count{operation=\"claim\"}"), b_claims)
      << "Postgres was not asked";
  EXPECT_EQ(metric_in(b_metrics, "idemproxy_requests_total{route=\"orders\",decision=\"replay_redis\"}"), 1.0)
      << b_metrics;

  // The Redis hit filled B's in-process cache: the next replay needs no network at all.
  const HttpResponse again = b_->send(order(key));
  ASSERT_EQ(again.status, 200) << describe(again);
  EXPECT_TRUE(is_replay(again));
  EXPECT_EQ(again.body, first.body);
  b_metrics = b_->metrics();
  EXPECT_EQ(metric_in(b_metrics, "idemproxy_redis_cache_hits_total"), 1.0);
  EXPECT_EQ(metric_in(b_metrics, "idemproxy_replay_cache_hits_total"), 1.0);
  EXPECT_EQ(metric_in(b_metrics, "idemproxy_store_duration_seconds_count{operation=\"claim\"}"), b_claims);
  EXPECT_EQ(a_->harness().upstream_count(key), 1u);

  // The access log labels the Redis-served replay.
  ASSERT_TRUE(eventually(
      [&] {
        return b_->harness().proxy_process()->stderr_text().find("\"decision\":\"replay_redis\"") != std::string::npos;
      },
      5s))
      << b_->harness().proxy_process()->stderr_text();
}

// key_expires_header: B's replay from Redis carries A's first answer's Idempotency-Key-Expires
// (the value is stored with the response, so every tier repeats it).
TEST_F(RedisReplayCache, KeyExpiresFromRedisIsTheFirstAnswersValue) {
  start_pair();
  const std::string key = unique_key("redis-expires");
  const auto request = HttpRequest::post("/expiring", "{}").with("Idempotency-Key", key);
  const double writes = a_->redis_writes();
  const HttpResponse first = a_->send(request);
  ASSERT_EQ(first.status, 200) << describe(first);
  const std::vector<std::string> expires = first.header_values("Idempotency-Key-Expires");
  ASSERT_EQ(expires.size(), 1u) << describe(first);
  ASSERT_TRUE(eventually([&] { return a_->redis_writes() >= writes + 1; }, 5s)) << a_->metrics();

  const HttpResponse replay = b_->send(request);
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.header_values("Idempotency-Key-Expires"), expires) << describe(replay);
  expect_same_stored_response(first, replay);
  EXPECT_EQ(b_->redis_hits(), 1.0) << "the replay came from Redis";
  EXPECT_EQ(a_->harness().upstream_count(key), 1u);
}

// The Redis families in the exposition pass `promtool check metrics`, every fallback reason
// present from the start (so rate() works before the first fallback).
TEST_F(RedisReplayCache, MetricsPassPromtool) {
  start_pair();
  execute_on_a(unique_key("redis-metrics"));
  const std::string text = a_->metrics();
  for (const std::string_view reason : {"timeout", "disconnected", "error", "corrupt"}) {
    EXPECT_TRUE(
        ops::metric_value(text, "idemproxy_redis_cache_fallbacks_total{reason=\"" + std::string(reason) + "\"}"))
        << reason << "\n"
        << text;
  }
  EXPECT_EQ(ops::metric_type(text, "idemproxy_redis_up"), "gauge");
  EXPECT_EQ(ops::metric_type(text, "idemproxy_redis_cache_hits_total"), "counter");
  EXPECT_EQ(metric_in(text, "idemproxy_redis_cache_writes_total"), 1.0);

  const auto exposition = redis_dir_.path() / "metrics.txt";
  {
    std::ofstream out(exposition, std::ios::binary);
    out << text;
  }
  const RunResult check =
      run_to_exit(ProcessSpec{"/bin/sh",
                              {"-c", "exec \"$0\" check metrics < \"$1\"", ops::promtool_binary(), exposition.string()},
                              {},
                              redis_dir_.path(),
                              "promtool"},
                  30s);
  EXPECT_EQ(check.exit_status, 0) << check.stdout_text << check.stderr_text;
}

// (b) A Redis-cached record still checks the fingerprint: the same 422 as from Postgres.
TEST_F(RedisReplayCache, FingerprintMismatchAgainstARedisRecordIs422) {
  start_pair();
  const std::string key = unique_key("redis-mismatch");
  execute_on_a(key);
  const double b_claims = b_->claims();
  const HttpResponse other = b_->send(order(key, R"({"item":"lamp","quantity":3})"));
  expect_problem(other, 422, "fingerprint-mismatch");
  EXPECT_FALSE(is_replay(other));
  EXPECT_EQ(b_->redis_hits(), 1.0);
  EXPECT_EQ(b_->claims(), b_claims);
  EXPECT_EQ(b_->metric("idemproxy_requests_total{route=\"orders\",decision=\"mismatch_422\"}"), 1.0);
  EXPECT_EQ(a_->harness().upstream_count(key), 1u);

  // And A's own answer for the same mismatch, from its in-process copy, is the same problem.
  const HttpResponse from_a = a_->send(order(key, R"({"item":"lamp","quantity":3})"));
  expect_problem(from_a, 422, "fingerprint-mismatch");
  EXPECT_EQ(from_a.body, other.body);
}

// (c) Redis gone: replays still correct from Postgres, counted as fallbacks, no errors; Redis back:
// hits resume.
TEST_F(RedisReplayCache, RedisDownFallsBackToPostgresAndRecovers) {
  use_private_redis();
  settings_.replay_cache_bytes = "0";  // every replay asks Redis (then Postgres)
  start_pair();
  const std::string before_outage = unique_key("redis-down-1");
  const HttpResponse first = execute_on_a(before_outage);

  private_redis_->kill();
  ASSERT_TRUE(eventually([&] { return !b_->redis_up() && !a_->redis_up(); }, 5s));
  const double b_claims = b_->claims();
  const HttpResponse replay = b_->send(order(before_outage));
  ASSERT_EQ(replay.status, 200) << describe(replay);
  EXPECT_TRUE(is_replay(replay));
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(b_->claims(), b_claims + 1) << "answered by Postgres";

  const std::string during_outage = unique_key("redis-down-2");
  const HttpResponse executed = a_->send(order(during_outage));
  ASSERT_EQ(executed.status, 200) << describe(executed);
  const HttpResponse replayed = b_->send(order(during_outage));
  ASSERT_EQ(replayed.status, 200) << describe(replayed);
  EXPECT_TRUE(is_replay(replayed));
  EXPECT_EQ(replayed.body, executed.body);
  EXPECT_EQ(a_->harness().upstream_count(before_outage), 1u);
  EXPECT_EQ(a_->harness().upstream_count(during_outage), 1u);
  const std::string b_metrics = b_->metrics();
  EXPECT_GE(metric_in(b_metrics, "idemproxy_redis_cache_fallbacks_total{reason=\"disconnected\"}"), 2.0) << b_metrics;
  EXPECT_EQ(metric_in(b_metrics, "idemproxy_responses_total{class=\"5xx\"}"), 0.0) << b_metrics;
  EXPECT_EQ(a_->metric("idemproxy_responses_total{class=\"5xx\"}"), 0.0);

  private_redis_->restart();
  ASSERT_TRUE(eventually([&] { return a_->redis_up() && b_->redis_up(); }, 15s))
      << "reconnected within the backoff cap";
  const std::string after_outage = unique_key("redis-down-3");
  const HttpResponse later = execute_on_a(after_outage);
  const double hits = b_->redis_hits();
  const HttpResponse hit = b_->send(order(after_outage));
  ASSERT_EQ(hit.status, 200) << describe(hit);
  EXPECT_TRUE(is_replay(hit));
  EXPECT_EQ(hit.body, later.body);
  EXPECT_EQ(b_->redis_hits(), hits + 1);
}

// (d) Redis hanging (SIGSTOP): every replay still answered, each well under a second; the first
// lookup waits for its deadline, the rest fall back at once.
TEST_F(RedisReplayCache, HangingRedisCostsAtMostTheDeadline) {
  use_private_redis();
  settings_.replay_cache_bytes = "0";
  settings_.timeout = "20ms";
  start_pair();
  std::vector<std::string> keys;
  std::vector<HttpResponse> firsts;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(unique_key("redis-hang"));
    firsts.push_back(execute_on_a(keys.back()));
  }
  private_redis_->pause();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto started = Clock::now();
    const HttpResponse replay = b_->send(order(keys[i]));
    const auto took = Clock::now() - started;
    ASSERT_EQ(replay.status, 200) << describe(replay);
    EXPECT_TRUE(is_replay(replay));
    EXPECT_EQ(replay.body, firsts[i].body);
    EXPECT_LT(took, 500ms) << "replay " << i;
  }
  // A first request while Redis hangs executes as usual.
  const std::string fresh = unique_key("redis-hang-new");
  const auto started = Clock::now();
  const HttpResponse executed = a_->send(order(fresh));
  EXPECT_EQ(executed.status, 200) << describe(executed);
  EXPECT_LT(Clock::now() - started, 1s);
  EXPECT_GE(b_->fallbacks("timeout"), 1.0) << b_->metrics();
  EXPECT_EQ(b_->metric("idemproxy_responses_total{class=\"5xx\"}"), 0.0);

  private_redis_->resume();
  ASSERT_TRUE(eventually([&] { return a_->redis_up() && b_->redis_up(); }, 15s));
  // Hits resume. A few tries: a 20 ms deadline can still pass on a loaded machine.
  bool hit_again = false;
  for (int attempt = 0; attempt < 5 && !hit_again; ++attempt) {
    const std::string after = unique_key("redis-hang-after");
    const HttpResponse later = execute_on_a(after);
    const double hits = b_->redis_hits();
    const HttpResponse replay = b_->send(order(after));
    EXPECT_TRUE(is_replay(replay));
    EXPECT_EQ(replay.body, later.body);
    hit_again = b_->redis_hits() == hits + 1;
  }
  EXPECT_TRUE(hit_again) << b_->metrics();
}

// (e) Encryption at rest: Redis holds no readable response; a damaged value is a counted fallback
// to Postgres (never a 500, never a replay of it), and the Postgres answer repairs the copy.
TEST_F(RedisReplayCache, EncryptedValuesAreUnreadableAndCorruptOnesFallBack) {
  settings_.encryption = true;
  settings_.replay_cache_bytes = "0";
  start_pair();
  const std::string key = unique_key("redis-sealed");
  const std::string secret = "secret-" + unique_key("pan");
  const std::string receipt = "rcpt-" + unique_key("r");
  const std::string body = R"({"item":")" + secret + R"(","quantity":1})";
  const double writes = a_->redis_writes();
  const HttpResponse first = a_->send(order(key, body)
                                          .with(std::string(upstream::kEchoHeader), "1")
                                          .with(std::string(upstream::kAddHeaderHeader), "X-Receipt: " + receipt));
  ASSERT_EQ(first.status, 200) << describe(first);
  ASSERT_EQ(first.body, body) << "the upstream echoes the request body";
  ASSERT_EQ(first.header("X-Receipt"), receipt);
  ASSERT_TRUE(eventually([&] { return a_->redis_writes() >= writes + 1; }, 5s));

  RedisClient client(settings_.redis_port);
  const std::vector<std::string> stored = redis_keys(client);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].find(key), std::string::npos) << "the raw key never appears in Redis";
  const redis::RedisReply raw = client.command({"GET", stored[0]});
  ASSERT_EQ(raw.kind, redis::RedisReply::Kind::string);
  EXPECT_EQ(raw.text.find(secret), std::string::npos) << "body readable in Redis";
  EXPECT_EQ(raw.text.find(receipt), std::string::npos) << "headers readable in Redis";
  EXPECT_NE(raw.text.find("@idemproxy-sealed"), std::string::npos);

  const HttpResponse hit = b_->send(order(key, body));
  ASSERT_EQ(hit.status, 200) << describe(hit);
  EXPECT_TRUE(is_replay(hit));
  EXPECT_EQ(hit.body, body);
  EXPECT_EQ(hit.header("X-Receipt"), receipt);
  EXPECT_EQ(b_->redis_hits(), 1.0);

  // One byte of the ciphertext flipped, the TTL kept.
  std::string damaged = raw.text;
  damaged[damaged.size() - 8] = static_cast<char>(damaged[damaged.size() - 8] ^ 0x5a);
  ASSERT_EQ(client.command({"SET", stored[0], damaged, "KEEPTTL"}).text, "OK");
  const double b_claims = b_->claims();
  const double b_writes = b_->redis_writes();
  const HttpResponse from_postgres = b_->send(order(key, body));
  ASSERT_EQ(from_postgres.status, 200) << describe(from_postgres);
  EXPECT_TRUE(is_replay(from_postgres));
  EXPECT_EQ(from_postgres.body, body);
  EXPECT_EQ(b_->fallbacks("corrupt"), 1.0) << b_->metrics();
  EXPECT_EQ(b_->claims(), b_claims + 1);
  EXPECT_EQ(b_->redis_hits(), 1.0) << "the damaged value was not replayed";
  EXPECT_EQ(a_->harness().upstream_count(key), 1u);
  EXPECT_NE(b_->harness().proxy_process()->stderr_text().find("redis_cache_corrupt"), std::string::npos);

  // B copied Postgres's answer back: the next replay is a Redis hit again.
  ASSERT_TRUE(eventually([&] { return b_->redis_writes() >= b_writes + 1; }, 5s));
  EXPECT_NE(client.command({"GET", stored[0]}).text, damaged);
  const HttpResponse repaired = b_->send(order(key, body));
  EXPECT_TRUE(is_replay(repaired));
  EXPECT_EQ(repaired.body, body);
  EXPECT_EQ(b_->redis_hits(), 2.0) << b_->metrics();
}

// (f) The copy never outlives the record; records with under a second to live (after the
// one-second margin taken off every copy) are not copied.
TEST_F(RedisReplayCache, CopyExpiresNoLaterThanTheRecord) {
  start_pair();
  const std::string key = unique_key("redis-ttl");
  execute_on_a(key);
  RedisClient client(settings_.redis_port);
  const std::vector<std::string> stored = redis_keys(client);
  ASSERT_EQ(stored.size(), 1u);
  const std::int64_t pttl = client.command({"PTTL", stored[0]}).integer;

  const HttpResponse inspected = ops::admin_get(a_->admin_port(), "/admin/keys/orders/" + key + "?host=127.0.0.1",
                                                std::nullopt, {{"X-Tenant-Id", "t1"}});
  ASSERT_EQ(inspected.status, 200) << describe(inspected);
  const auto record = boost::json::parse(inspected.body).as_object();
  const std::int64_t expires_at_ms = record.at("expires_at_ms").as_int64();
  const std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_GT(pttl, 3'500'000) << "about the route's ttl of 1h";
  EXPECT_LE(pttl, expires_at_ms - now_ms) << "Redis keeps the copy no longer than Postgres keeps the record";

  // No ttl a lease allows is that short from the start (it must exceed the lease, which the timing
  // model bounds below), so the short record is replayed near its end instead: A copies it when it
  // completes, with seconds to live; that copy is taken away, and B, asked for it with about 1.5 s
  // left, replays it from Postgres and must not offer it to Redis.
  const std::string short_key = unique_key("s");
  const HttpRequest short_request = HttpRequest::post("/short", "{}").with("Idempotency-Key", short_key);
  const double a_writes = a_->redis_writes();
  const auto short_sent_at = Clock::now();
  const HttpResponse short_lived = a_->send(short_request);
  ASSERT_EQ(short_lived.status, 200) << describe(short_lived);
  ASSERT_TRUE(eventually([&] { return a_->redis_writes() >= a_writes + 1; }, 5s)) << a_->metrics();
  ASSERT_TRUE(eventually([&] { return redis_keys(client).size() == 2u; }, 2s));
  for (const std::string& copy : redis_keys(client)) {
    if (copy != stored[0]) client.command({"DEL", copy});
  }
  ASSERT_EQ(redis_keys(client).size(), 1u);
  std::this_thread::sleep_until(short_sent_at + kShortTtl - 1500ms);
  const double b_writes = b_->redis_writes();
  const HttpResponse late = b_->send(short_request);
  ASSERT_EQ(late.status, 200) << describe(late);
  EXPECT_TRUE(is_replay(late)) << "the short record expired before its late replay: " << describe(late);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(b_->redis_writes(), b_writes);
  EXPECT_EQ(redis_keys(client).size(), 1u) << "a record with under a second left is not copied";
  EXPECT_EQ(a_->harness().upstream_count(short_key), 1u);
}

// A released record (release_statuses) never reaches Redis: the retry executes again.
TEST_F(RedisReplayCache, ReleasedRecordsAreNeverCopied) {
  start_pair();
  const std::string key = unique_key("redis-released");
  const auto transient = [&] {
    return HttpRequest::post("/transient", "{}")
        .with("Idempotency-Key", key)
        .with(std::string(upstream::kStatusHeader), "503");
  };
  EXPECT_EQ(a_->send(transient()).status, 503);
  std::this_thread::sleep_for(200ms);
  RedisClient client(settings_.redis_port);
  EXPECT_TRUE(redis_keys(client).empty());
  EXPECT_EQ(a_->redis_writes(), 0.0);
  const HttpResponse retried = b_->send(transient());
  EXPECT_EQ(retried.status, 503);
  EXPECT_FALSE(is_replay(retried));
  EXPECT_EQ(a_->harness().upstream_count(key), 2u) << "released, so the retry executed";
  EXPECT_EQ(b_->redis_hits(), 0.0);
}

// What an operator can release (unknown, in-flight) is never in Redis: after the release the retry
// executes, and only its completed record is copied and replayed.
TEST_F(RedisReplayCache, OperatorReleaseNeedsNothingDeletedFromRedis) {
  start_pair();
  const std::string key = unique_key("redis-unknown");
  // The upstream never answers: past upstream.timeout the outcome is unknown and the key locked.
  const HttpResponse lost = a_->send(order(key).with(std::string(upstream::kHangHeader), "1"));
  ASSERT_EQ(lost.status, 504) << describe(lost);
  RedisClient client(settings_.redis_port);
  EXPECT_TRUE(redis_keys(client).empty());
  expect_problem(b_->send(order(key)), 502, "outcome-unknown");

  const HttpResponse released = ops::admin_post(
      b_->admin_port(), "/admin/keys/orders/" + key + "/release?host=127.0.0.1", std::nullopt, {{"X-Tenant-Id", "t1"}});
  ASSERT_EQ(released.status, 200) << describe(released);
  const HttpResponse executed = execute_on_a(key);
  EXPECT_EQ(a_->harness().upstream_count(key), 2u) << "released, so the retry executed";
  EXPECT_EQ(redis_keys(client).size(), 1u);
  const HttpResponse replay = b_->send(order(key));
  EXPECT_TRUE(is_replay(replay));
  EXPECT_EQ(replay.body, executed.body);
  EXPECT_EQ(b_->redis_hits(), 1.0);
}

// Responses beyond max_value_bytes stay out of Redis; the other proxy replays them from Postgres.
TEST_F(RedisReplayCache, OversizedResponsesStayInPostgresOnly) {
  settings_.max_value = "2KiB";
  start_pair();
  const std::string key = unique_key("redis-big");
  const auto big = [&] { return order(key).with(std::string(upstream::kBodySizeHeader), "4096"); };
  const HttpResponse first = a_->send(big());
  ASSERT_EQ(first.status, 200) << describe(first);
  ASSERT_EQ(first.body.size(), 4096u);
  std::this_thread::sleep_for(200ms);
  RedisClient client(settings_.redis_port);
  EXPECT_TRUE(redis_keys(client).empty());
  const double b_claims = b_->claims();
  const HttpResponse replay = b_->send(big());
  ASSERT_EQ(replay.status, 200) << describe(replay);
  EXPECT_TRUE(is_replay(replay));
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(b_->claims(), b_claims + 1);
}

// AUTH and SELECT from the config: the copy lands in the configured database of a server that
// requires a password, and the other proxy finds it there.
TEST_F(RedisReplayCache, AuthenticatesAndUsesTheConfiguredDatabase) {
  use_private_redis({"--requirepass", "e2e-pw"});
  settings_.password = "e2e-pw";
  settings_.database = 2;
  start_pair();
  const std::string key = unique_key("redis-auth");
  const HttpResponse first = execute_on_a(key);
  RedisClient client(settings_.redis_port, "e2e-pw");
  EXPECT_TRUE(redis_keys(client).empty()) << "nothing in database 0";
  ASSERT_EQ(client.command({"SELECT", "2"}).text, "OK");
  EXPECT_EQ(redis_keys(client).size(), 1u);
  const HttpResponse replay = b_->send(order(key));
  EXPECT_TRUE(is_replay(replay));
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(b_->redis_hits(), 1.0);
}

}  // namespace
}  // namespace idem::test::e2e
