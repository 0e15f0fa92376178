// The exchange in-process, as Envoy tests its cache filter: the real coroutine over the memory
// store, the in-process replay cache and a fake upstream that counts what it executed. One test
// per row of the README's behaviour table that the exchange decides (the rows about parsing and
// connections belong to the client connection and are tested end to end).
#include "http/idempotent_exchange.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <array>
#include <chrono>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/clock.hpp"
#include "core/http_date.hpp"
#include "core/request_target.hpp"
#include "core/stored_headers.hpp"
#include "fingerprint/fingerprint.hpp"
#include "http/pending_settlements.hpp"
#include "http/proxy_metrics.hpp"
#include "cache/replay_cache.hpp"
#include "http/runtime.hpp"
#include "cache/shared_replay_cache.hpp"
#include "http/upstream.hpp"
#include "store/memory_store.hpp"
#include "support/manual_clock.hpp"

namespace {
namespace asio = boost::asio;
namespace http = idem::http;
namespace core = idem::core;
namespace store = idem::store;
namespace beast_http = boost::beast::http;
using namespace std::chrono_literals;
using core::UpstreamFailure;
using store::StoreError;

// The request the upstream was sent, as a Beast message (read with Beast's lookups by name).
http::Request received_by_upstream(const http::UpstreamRequest& sent) {
  const http::RequestParts& parts = sent.parts();
  http::Request request;
  request.method_string(parts.method_string);
  request.target(parts.target);
  request.version(parts.version);
  for (const http::FieldView& field : parts.fields) request.insert(field.name, field.value);
  request.body().assign(parts.body);
  return request;
}

// A request as the client connection hands it to the exchange: views of a Beast message's parts.
struct HeldRequest {
  explicit HeldRequest(http::Request r) : request(std::move(r)) {
    parts = {.method = request.method(),
             .method_string = request.method_string(),
             .target = request.target(),
             .version = request.version(),
             .fields = {},
             .body = request.body()};
    for (const auto& field : request) parts.fields.push_back({field.name(), field.name_string(), field.value()});
  }
  HeldRequest(const HeldRequest&) = delete;
  HeldRequest& operator=(const HeldRequest&) = delete;
  http::Request request;
  http::RequestParts parts;
};

// Answers from a script, then 201 "created-<n>"; counts every request it was sent.
class FakeUpstream final : public http::Upstream {
 public:
  // Answers whole (the pool's bodies past keep_up_to are streamed: e2e tests cover them).
  asio::awaitable<http::UpstreamResult> exchange(const http::UpstreamRequest& request, std::size_t,
                                                 std::chrono::milliseconds) override {
    ++executions;
    last_request = received_by_upstream(request);
    if (delay > std::chrono::milliseconds::zero()) {
      asio::steady_timer timer(co_await asio::this_coro::executor, delay);
      co_await timer.async_wait(asio::use_awaitable);
    }
    if (!script.empty()) {
      http::UpstreamResult next = std::move(script.front());
      script.pop_front();
      co_return next;
    }
    http::UpstreamResult result;
    result.response.result(201);
    result.response.set(beast_http::field::content_type, "application/json");
    result.response.body() = "created-" + std::to_string(executions);
    co_return result;
  }
  // The exchange never streams (http/streamed_forwarding.hpp does, over a real pool).
  asio::awaitable<UpstreamFailure> acquire(http::UpstreamLease&) override { co_return UpstreamFailure::connect_failed; }
  void close_idle() override {}

  void answer(int status, std::string body, std::optional<std::string> transient = std::nullopt) {
    http::UpstreamResult result;
    result.response.result(status);
    result.response.body() = std::move(body);
    if (transient) result.response.set("Idempotency-Transient", *transient);
    script.push_back(std::move(result));
  }
  void fail(UpstreamFailure failure, int status = 0) {
    http::UpstreamResult result;
    result.failure = failure;
    if (status != 0) result.response.result(status);
    script.push_back(std::move(result));
  }

  int executions = 0;
  http::Request last_request;
  std::deque<http::UpstreamResult> script;
  std::chrono::milliseconds delay{0};  // before every answer: the request is "at the upstream"

 private:
  void take_back(http::UpstreamConnection&&) override {}
};

// The memory store, with errors injected on the next claim or owner write. `after_running`: the
// operation takes effect and only its answer is replaced (a reply lost after the commit).
class ScriptedStore final : public store::Store {
 public:
  explicit ScriptedStore(const core::Clock& clock) : memory(clock) {}

  struct Fault {
    StoreError error = StoreError::ok;
    bool after_running = false;
  };
  std::optional<Fault> next_claim, next_complete;

  void claim(const store::ClaimRequest& request, store::ClaimHandler handler) override {
    ++claims;
    if (auto fault = std::exchange(next_claim, std::nullopt)) {
      if (fault->after_running) memory.claim(request, [](StoreError, core::ClaimResult) {});
      handler(fault->error, {});
      return;
    }
    memory.claim(request, std::move(handler));
  }
  void complete(const store::CompleteRequest& request, store::DoneHandler handler) override {
    if (auto fault = std::exchange(next_complete, std::nullopt)) {
      if (fault->after_running) memory.complete(request, [](StoreError) {});
      handler(fault->error);
      return;
    }
    memory.complete(request, std::move(handler));
  }
  void release(const store::ReleaseRequest& request, store::DoneHandler handler) override {
    if (releases_unavailable > 0) {
      --releases_unavailable;
      handler(StoreError::unavailable);
      return;
    }
    memory.release(request, std::move(handler));
  }
  void mark_unknown(const store::ReleaseRequest& request, store::DoneHandler handler) override {
    memory.mark_unknown(request, std::move(handler));
  }
  void force_release(const store::RecordKey& key, store::ForceReleaseHandler handler) override {
    memory.force_release(key, std::move(handler));
  }
  void sweep_expired(std::size_t batch, store::SweepHandler handler) override {
    memory.sweep_expired(batch, std::move(handler));
  }
  void inspect(const store::RecordKey& key, store::InspectHandler handler) override {
    memory.inspect(key, std::move(handler));
  }

  store::MemoryStore memory;
  int claims = 0;
  int releases_unavailable = 0;  // the next releases find no store
};

// A shared (Redis) cache that holds what it was given, in-process.
class MapSharedCache final : public idem::cache::SharedReplayCache {
 public:
  void lookup(std::string_view scope, std::string_view key, idem::cache::SharedLookupHandler handler) override {
    idem::cache::SharedLookup answer;
    const auto found = entries.find(std::string(scope) + '\n' + std::string(key));
    if (found != entries.end()) {
      answer.outcome = idem::cache::SharedLookupOutcome::hit;
      answer.record = found->second;
    }
    ++lookups;
    handler(std::move(answer));
  }
  void put(std::string_view scope, std::string_view key,
           std::shared_ptr<const idem::cache::CachedRecord> record) override {
    entries[std::string(scope) + '\n' + std::string(key)] = std::move(record);
  }
  std::map<std::string, std::shared_ptr<const idem::cache::CachedRecord>> entries;
  int lookups = 0;
};

struct Answer {
  http::Response response;
  http::RequestTrace trace;
  // Where an answer past max_stored_body would leave its body (the fake upstream answers whole).
  std::shared_ptr<std::unique_ptr<http::OpenResponse>> rest = std::make_shared<std::unique_ptr<http::OpenResponse>>();
};

class Exchange : public ::testing::Test {
 protected:
  Exchange() { policy.name = "orders"; }

  // A fresh in-process cache (0: off), as a proxy with a cold cache or none would have.
  void use_local_cache(std::size_t bytes) {
    cache = std::make_unique<idem::cache::ReplayCache>(bytes);
    rewire();
  }
  void use_shared_cache(idem::cache::SharedReplayCache* redis) {
    shared = redis;
    rewire();
  }
  // The services a worker would pass, over the current caches (between runs only).
  void rewire() {
    services_ = std::make_unique<http::WorkerServices>(http::WorkerServices{
        config, store_, {&upstream}, background, waiting, connections, *cache, metrics, pending, shared});
  }

  http::Request request(std::string body = R"({"amount":100})", std::string host = "shop.example") {
    http::Request r{beast_http::verb::post, "/orders", 11};
    r.set(beast_http::field::host, host);
    r.set(beast_http::field::content_type, "application/json");
    r.set("Idempotency-Key", "k-1");
    r.body() = std::move(body);
    r.prepare_payload();
    return r;
  }

  // Starts one exchange on the io_context; its answer is filled in once it ran (see run()).
  std::shared_ptr<Answer> start(http::Request r, std::optional<std::string> key = "k-1") {
    auto answer = std::make_shared<Answer>();
    start_into(answer, std::move(r), std::move(key));
    return answer;
  }
  void start_into(const std::shared_ptr<Answer>& answer, http::Request r, std::optional<std::string> key) {
    auto request_held = std::make_shared<HeldRequest>(std::move(r));
    asio::co_spawn(io,
                   http::run_idempotent_exchange(*services_, terms, policy, request_held->parts, "192.0.2.1",
                                                 std::move(key), "/orders", "", answer->trace, *answer->rest),
                   [answer, request_held](std::exception_ptr error, http::Response response) {
                     if (error) std::rethrow_exception(error);
                     answer->response = std::move(response);
                   });
  }

  // start(), `delay` later on the io_context, after the store's clock moved `clock_moves`.
  std::shared_ptr<Answer> start_after(std::chrono::milliseconds delay, std::chrono::milliseconds clock_moves,
                                      http::Request r) {
    auto answer = std::make_shared<Answer>();
    auto timer = std::make_shared<asio::steady_timer>(io, delay);
    auto request_held = std::make_shared<http::Request>(std::move(r));
    timer->async_wait([this, timer, answer, request_held, clock_moves](boost::system::error_code) {
      clock.advance(clock_moves);
      start_into(answer, std::move(*request_held), "k-1");
    });
    return answer;
  }

  // Runs every started exchange to its response, and every background write they left.
  void run() {
    io.restart();
    io.run();
  }
  Answer send(http::Request r, std::optional<std::string> key = "k-1") {
    auto answer = start(std::move(r), std::move(key));
    run();
    return *answer;
  }
  // The same request answered twice: first by the in-process cache, which must hold its record,
  // then, with the cache dropped, by the store.
  std::array<Answer, 2> send_from_cache_then_store(const http::Request& r, std::optional<std::string> key = "k-1") {
    Answer local = send(r, key);
    EXPECT_TRUE(local.trace.cache_hit);
    use_local_cache(0);
    Answer stored = send(r, key);
    EXPECT_FALSE(stored.trace.cache_hit);
    return {std::move(local), std::move(stored)};
  }
  // The route reads the key from the body (key_from_json): the handler passes no header key.
  Answer send_keyed_by_body(http::Request r) { return send(std::move(r), std::nullopt); }

  // A record as a proxy before fingerprint v2 made it: claimed with the request's "v1:" fingerprint
  // (numbers as doubles), then completed with `body` unless `completed` is false (left in flight).
  void put_v1_record(const http::Request& r, bool completed, std::string key = "k-1") {
    idem::fingerprint::RequestFacts facts;
    facts.method = r.method_string();
    facts.path = "/orders";
    facts.content_type = r[beast_http::field::content_type];
    for (const std::string& name : policy.fingerprint_headers) facts.headers.emplace_back(name, std::string(r[name]));
    facts.body = r.body();
    const std::string scope =
        idem::fingerprint::request_scope(policy, core::scope_host(r[beast_http::field::host]), {}).scope;
    const store::ClaimRequest claim{.scope = scope,
                                    .key = key,
                                    .fingerprint = idem::fingerprint::request_fingerprint(
                                        facts, policy.ignore_json, idem::fingerprint::FingerprintScheme::v1),
                                    .owner = "proxy-before-the-upgrade",
                                    .ttl = policy.ttl,
                                    .lease = policy.lease};
    ASSERT_EQ(claim.fingerprint.substr(0, 3), "v1:");
    bool claimed = false;
    store_.memory.claim(claim, [&](StoreError error, core::ClaimResult result) {
      claimed = error == StoreError::ok && result.claimed;
    });
    ASSERT_TRUE(claimed);
    if (!completed) return;
    store::CompleteRequest completion{.scope = scope,
                                      .key = key,
                                      .owner = claim.owner,
                                      .state = core::RecordState::completed,
                                      .response = {200, {}, "created-before-the-upgrade"},
                                      .ttl = policy.ttl};
    StoreError completed_error = StoreError::internal;
    store_.memory.complete(completion, [&](StoreError error) { completed_error = error; });
    ASSERT_EQ(completed_error, StoreError::ok);
  }

  template <class Message>
  static std::string field(const Message& response, std::string_view name) {
    return std::string(response[name]);
  }

  core::RoutePolicy policy;
  http::ForwardingTerms terms{.upstream = 0,
                              .timeout = std::chrono::seconds(5),
                              .stream_idle_timeout = std::chrono::seconds(5),
                              .max_request_body = 1024 * 1024};
  idem::test::ManualClock clock;
  ScriptedStore store_{clock};
  FakeUpstream upstream;
  asio::io_context io;
  std::shared_ptr<const http::RuntimeConfig> config = std::make_shared<http::RuntimeConfig>(http::ProxyOptions{});
  http::BackgroundTasks background;
  std::atomic<std::size_t> waiting{0};
  std::atomic<std::size_t> connections{0};
  std::unique_ptr<idem::cache::ReplayCache> cache = std::make_unique<idem::cache::ReplayCache>(1 << 20);
  http::ProxyMetrics metrics;
  idem::cache::SharedReplayCache* shared = nullptr;
  http::PendingSettlements pending;
  std::unique_ptr<http::WorkerServices> services_ = std::make_unique<http::WorkerServices>(http::WorkerServices{
      config, store_, {&upstream}, background, waiting, connections, *cache, metrics, pending, shared});
};

TEST_F(Exchange, NewKeyExecutesOnceAndReturnsTheUpstreamsResponseStoredBeforeItIsReturned) {
  const Answer first = send(request());
  EXPECT_EQ(first.response.result_int(), 201u);
  EXPECT_EQ(first.response.body(), "created-1");
  EXPECT_EQ(field(first.response, "Idempotent-Replay"), "");
  EXPECT_EQ(first.trace.decision, http::decision::executed);
  EXPECT_EQ(upstream.executions, 1);
  EXPECT_EQ(field(upstream.last_request, "Idempotency-Key"), "k-1");  // forwarded upstream
  // Stored before the client saw it: a second proxy (no cache) replays it from the store.
  use_local_cache(0);
  const Answer replay = send(request());
  EXPECT_EQ(replay.trace.decision, http::decision::replay);
  EXPECT_EQ(replay.response.body(), "created-1");
}

TEST_F(Exchange, SameKeySameRequestReplaysStatusHeadersAndBodyFromEveryTierWithoutExecuting) {
  send(request());
  // From the in-process cache: no store round trip.
  const int claims_before = store_.claims;
  const Answer local = send(request());
  EXPECT_EQ(store_.claims, claims_before);
  EXPECT_TRUE(local.trace.cache_hit);
  EXPECT_EQ(local.trace.decision, http::decision::replay);
  // From the store, with no cache.
  use_local_cache(0);
  const Answer stored = send(request());
  EXPECT_EQ(stored.trace.decision, http::decision::replay);
  EXPECT_FALSE(stored.trace.cache_hit);
  for (const Answer* answer : {&local, &stored}) {
    EXPECT_EQ(answer->response.result_int(), 201u);
    EXPECT_EQ(field(answer->response, "Content-Type"), "application/json");
    EXPECT_EQ(answer->response.body(), "created-1");
    EXPECT_EQ(field(answer->response, "Idempotent-Replay"), "true");
  }
  EXPECT_EQ(upstream.executions, 1);
}

// replay_header lists several spellings: every one is `true` on every replay, from every tier, and
// none on the first execution, even when the upstream sets them itself (it is never stored).
TEST_F(Exchange, EveryReplayHeaderOfTheRouteIsTrueOnReplaysAndAbsentOnTheFirstExecution) {
  policy.replay_headers = {"Idempotent-Replay", "Idempotent-Replayed"};
  http::UpstreamResult upstream_says;
  upstream_says.response.result(201);
  upstream_says.response.set("Idempotent-Replayed", "true");
  upstream_says.response.set("Idempotent-Replay", "true");
  upstream_says.response.body() = "created";
  upstream.script.push_back(std::move(upstream_says));
  const Answer first = send(request());
  EXPECT_EQ(first.response.result_int(), 201u);
  EXPECT_EQ(first.response.count("Idempotent-Replay"), 0u);
  EXPECT_EQ(first.response.count("Idempotent-Replayed"), 0u);
  const auto replays = send_from_cache_then_store(request());
  for (const Answer* replay : {&replays[0], &replays[1]}) {
    EXPECT_EQ(replay->trace.decision, http::decision::replay);
    EXPECT_EQ(replay->response.body(), "created");
    EXPECT_EQ(replay->response.count("Idempotent-Replay"), 1u);
    EXPECT_EQ(replay->response.count("Idempotent-Replayed"), 1u);
    EXPECT_EQ(field(replay->response, "Idempotent-Replay"), "true");
    EXPECT_EQ(field(replay->response, "Idempotent-Replayed"), "true");
  }
  EXPECT_EQ(upstream.executions, 1);
}

// A reload after the first execution: a header stored then (the upstream's own "X-Replayed: no",
// not a replay header at the time) is now one of the route's replay headers, and the route no
// longer announces the key's expiry. Every replay, from every tier, says "true" once and sends no
// stored expiry.
TEST_F(Exchange, ReplayHeadersAndTheKeysExpiryFollowTheRouteAsReloadedNotAsStored) {
  policy.key_expires_header = true;
  http::UpstreamResult upstream_says;
  upstream_says.response.result(201);
  upstream_says.response.set("X-Replayed", "no");
  upstream_says.response.body() = "created";
  upstream.script.push_back(std::move(upstream_says));
  const Answer first = send(request());
  ASSERT_EQ(field(first.response, "X-Replayed"), "no");
  ASSERT_FALSE(field(first.response, core::kKeyExpiresHeader).empty());
  policy.key_expires_header = false;
  policy.replay_headers = {"Idempotent-Replay", "x-replayed"};
  const auto replays = send_from_cache_then_store(request());
  for (const Answer* replay : {&replays[0], &replays[1]}) {
    EXPECT_EQ(replay->trace.decision, http::decision::replay);
    EXPECT_EQ(replay->response.count("X-Replayed"), 1u);
    EXPECT_EQ(field(replay->response, "X-Replayed"), "true");
    EXPECT_EQ(replay->response.count(core::kKeyExpiresHeader), 0u);
    EXPECT_EQ(replay->response.body(), "created");
  }
  EXPECT_EQ(upstream.executions, 1);
}

// key_from_json: the key is the body's /id, read by the fingerprint's parse; the same event again
// is a replay, another id a new execution.
TEST_F(Exchange, AKeyReadFromTheJsonBodyClaimsReplaysAndSeparatesLikeAHeaderKey) {
  policy.key_source = core::KeySource::header_then_json;
  policy.key_from_json = "/id";
  const std::string event = R"({"id":"evt_1","type":"charge.succeeded","data":{"amount":100}})";
  const Answer first = send_keyed_by_body(request(event));
  EXPECT_EQ(first.response.result_int(), 201u);
  EXPECT_EQ(first.trace.decision, http::decision::executed);
  EXPECT_EQ(first.trace.key, "evt_1");
  use_local_cache(0);
  const Answer again = send_keyed_by_body(request(R"({"type":"charge.succeeded","data":{"amount":100},"id":"evt_1"})"));
  EXPECT_EQ(again.trace.decision, http::decision::replay);
  EXPECT_EQ(again.response.body(), first.response.body());
  // The same key under the header names the same record.
  const Answer by_header = send(request(event), "evt_1");
  EXPECT_EQ(by_header.trace.decision, http::decision::replay);
  EXPECT_EQ(upstream.executions, 1);
  const Answer other = send_keyed_by_body(request(R"({"id":"evt_2","type":"charge.succeeded","data":{"amount":100}})"));
  EXPECT_EQ(other.trace.decision, http::decision::executed);
  EXPECT_EQ(upstream.executions, 2);
  // Another body under the same id is another request: 422, as for a header key.
  const Answer reused = send_keyed_by_body(request(R"({"id":"evt_1","type":"charge.refunded"})"));
  EXPECT_EQ(reused.response.result_int(), 422u);
  EXPECT_EQ(upstream.executions, 2);
}

// A body without a usable key is refused with the header key's 400 family, before any claim; on a
// key: optional route, a body without the member is proxied plainly.
TEST_F(Exchange, ABodyWithoutAUsableKeyIs400NamingWhatIsWrongAndNothingIsClaimed) {
  policy.key_source = core::KeySource::json;
  policy.key_from_json = "/id";
  const auto refused = [&](std::string body, std::string_view type, std::string_view detail_part,
                           std::string content_type = "application/json") {
    http::Request r = request(std::move(body));
    r.set(beast_http::field::content_type, content_type);
    const Answer answer = send_keyed_by_body(std::move(r));
    EXPECT_EQ(answer.response.result_int(), 400u) << answer.response.body();
    EXPECT_NE(answer.response.body().find("urn:idemproxy:problem:" + std::string(type)), std::string::npos)
        << answer.response.body();
    EXPECT_NE(answer.response.body().find(detail_part), std::string::npos) << answer.response.body();
  };
  refused(R"({"type":"x"})", "key-missing", "the JSON body's /id holds the idempotency key");
  refused(R"({"id":12345})", "key-malformed", "is a number, not a string");
  refused(R"({"id":""})", "key-empty", "is empty");
  refused(R"({"id":")" + std::string(300, 'k') + R"("})", "key-too-long", "longer than 255 bytes");
  refused(R"({"id":"evt_1",)", "key-malformed", "the body is not JSON");
  refused(R"({"id":"evt_1"})", "key-malformed", "the body is not JSON", "text/plain");
  EXPECT_EQ(store_.claims, 0);
  EXPECT_EQ(upstream.executions, 0);

  policy.key = core::KeyRequirement::optional;
  const Answer plain = send_keyed_by_body(request(R"({"type":"x"})"));
  EXPECT_EQ(plain.response.result_int(), 201u);
  EXPECT_EQ(plain.trace.decision, http::decision::passthrough);
  EXPECT_EQ(store_.claims, 0);
  EXPECT_EQ(upstream.executions, 1);
}

// key_expires_header: the first answer and every replay (in-process cache, store) carry the same
// Idempotency-Key-Expires, the claim's time plus the ttl as an HTTP-date; an upstream's own is
// never passed on nor stored.
TEST_F(Exchange, KeyExpiresIsTheSameHttpDateOnTheFirstAnswerAndEveryReplay) {
  policy.key_expires_header = true;
  policy.ttl = std::chrono::hours(6);
  http::UpstreamResult upstream_says;
  upstream_says.response.result(201);
  upstream_says.response.set("Idempotency-Key-Expires", "Thu, 01 Jan 1970 00:00:00 GMT");
  upstream_says.response.body() = "created";
  upstream.script.push_back(std::move(upstream_says));
  const auto before = std::chrono::system_clock::now();
  const Answer first = send(request());
  const auto after = std::chrono::system_clock::now();
  const std::string expires = field(first.response, "Idempotency-Key-Expires");
  EXPECT_TRUE(expires == core::http_date(before + policy.ttl) || expires == core::http_date(after + policy.ttl))
      << expires;
  EXPECT_EQ(first.response.count("Idempotency-Key-Expires"), 1u);
  const auto replays = send_from_cache_then_store(request());
  for (const Answer* replay : {&replays[0], &replays[1]}) {
    EXPECT_EQ(replay->trace.decision, http::decision::replay);
    EXPECT_EQ(replay->response.count("Idempotency-Key-Expires"), 1u);
    EXPECT_EQ(field(replay->response, "Idempotency-Key-Expires"), expires);
  }
  // Turned off (a reload): replays stop announcing it.
  policy.key_expires_header = false;
  const Answer quiet = send(request());
  EXPECT_EQ(quiet.trace.decision, http::decision::replay);
  EXPECT_EQ(quiet.response.count("Idempotency-Key-Expires"), 0u);
  EXPECT_EQ(upstream.executions, 1);
}

// Off (the default): no Idempotency-Key-Expires at all, not even the upstream's.
TEST_F(Exchange, KeyExpiresIsNeverSentWhenTheRouteDoesNotAnnounceIt) {
  http::UpstreamResult upstream_says;
  upstream_says.response.result(201);
  upstream_says.response.set("Idempotency-Key-Expires", "Thu, 01 Jan 1970 00:00:00 GMT");
  upstream.script.push_back(std::move(upstream_says));
  EXPECT_EQ(send(request()).response.count("Idempotency-Key-Expires"), 0u);
  EXPECT_EQ(send(request()).response.count("Idempotency-Key-Expires"), 0u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, ARecordTheStoreReplaysIsSharedAndAnotherProxyReplaysItFromTheSharedCache) {
  MapSharedCache redis;
  use_shared_cache(&redis);
  use_local_cache(0);
  send(request());  // the completion is offered to the shared cache
  ASSERT_EQ(redis.entries.size(), 1u);
  const int claims_before = store_.claims;
  const Answer replay = send(request());
  EXPECT_EQ(replay.trace.decision, http::decision::replay_redis);
  EXPECT_EQ(store_.claims, claims_before);  // Redis answered; the store was not asked
  EXPECT_EQ(replay.response.body(), "created-1");
  EXPECT_EQ(field(replay.response, "Idempotent-Replay"), "true");
  // A different request under the key, answered from the cached copy, is still a 422.
  const Answer mismatch = send(request(R"({"amount":999})"));
  EXPECT_EQ(mismatch.response.result_int(), 422u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, TheSameKeyAtAnotherHostIsItsOwnRecord) {
  send(request(R"({"amount":100})", "a.example"));
  const Answer other = send(request(R"({"amount":100})", "b.example"));
  EXPECT_EQ(other.trace.decision, http::decision::executed);
  EXPECT_EQ(upstream.executions, 2);
}

TEST_F(Exchange, SameKeyDifferentRequestIs422FromTheCacheAndFromTheStore) {
  send(request());
  const Answer cached = send(request(R"({"amount":999})"));
  use_local_cache(0);
  const Answer stored = send(request(R"({"amount":999})"));
  for (const Answer* answer : {&cached, &stored}) {
    EXPECT_EQ(answer->response.result_int(), 422u);
    EXPECT_EQ(answer->trace.decision, http::decision::mismatch);
    EXPECT_NE(answer->response.body().find("urn:idemproxy:problem:fingerprint-mismatch"), std::string::npos);
  }
  EXPECT_EQ(upstream.executions, 1);
}

// A cache entry keeps its first request's fingerprint inputs, and a retry that repeats them takes
// the entry's fingerprint without computing its own. Each retry here is answered twice: by a proxy
// whose cache holds the first request's entry, and by one without a cache (the store compares
// fingerprints); the answers must agree, also when the route's fingerprint settings changed
// between the first request and the retry (a reload).
TEST_F(Exchange, ARetryIsJudgedTheSameWhetherItsFirstRequestsEntryIsCachedOrNot) {
  struct Retry {
    const char* what;
    std::string body;
    std::vector<std::string> ignore_json;  // the route's, when the retry arrives
    std::vector<std::string> fingerprint_headers;
    unsigned status;  // 201: the first request's answer, replayed
  };
  const std::vector<Retry> retries = {
      {"the same bytes", R"({"amount":100,"nonce":"n-1"})", {}, {}, 201},
      {"the same JSON spelled otherwise", R"({ "nonce":"n-1", "amount":1e2 })", {}, {}, 201},
      {"another amount", R"({"amount":101,"nonce":"n-1"})", {}, {}, 422},
      {"the same bytes after the route began ignoring /nonce", R"({"amount":100,"nonce":"n-1"})", {"/nonce"}, {}, 422},
      {"the same bytes after the route began fingerprinting X-Account",
       R"({"amount":100,"nonce":"n-1"})",
       {},
       {"X-Account"},
       422},
  };
  int key = 0;
  for (const Retry& retry : retries) {
    const std::string retry_key = "retry-" + std::to_string(++key);
    policy.ignore_json.clear();
    policy.fingerprint_headers.clear();
    use_local_cache(1 << 20);
    ASSERT_EQ(send(request(R"({"amount":100,"nonce":"n-1"})"), retry_key).trace.decision, http::decision::executed);
    policy.ignore_json = retry.ignore_json;
    policy.fingerprint_headers = retry.fingerprint_headers;
    const auto [cached, stored] = send_from_cache_then_store(request(retry.body), retry_key);
    EXPECT_EQ(cached.response.result_int(), retry.status) << retry.what;
    EXPECT_EQ(stored.response.result_int(), retry.status) << retry.what;
    EXPECT_EQ(cached.trace.decision, retry.status == 201 ? http::decision::replay : http::decision::mismatch)
        << retry.what;
  }
  EXPECT_EQ(upstream.executions, static_cast<int>(retries.size()));
}

TEST_F(Exchange, ADuplicateWhileTheFirstIsInFlightIs409WithTheLeaseLeftAsRetryAfter) {
  policy.lease = 30s;
  upstream.delay = 50ms;  // the duplicate arrives while the first is at the upstream
  const auto first = start(request());
  const auto duplicate = start(request());
  run();
  EXPECT_EQ(duplicate->response.result_int(), 409u);
  EXPECT_EQ(duplicate->trace.decision, http::decision::in_flight);
  EXPECT_NE(duplicate->response.body().find("request-in-flight"), std::string::npos);
  EXPECT_EQ(field(duplicate->response, "Retry-After"), "30");  // the store's clock did not move
  EXPECT_EQ(first->response.result_int(), 201u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, AWaitingDuplicateGetsTheFirstsResponseOnceItCompletes) {
  policy.in_flight = core::InFlightPolicy::wait;
  upstream.delay = 100ms;
  const auto first = start(request());
  const auto duplicate = start(request());
  run();
  EXPECT_EQ(first->response.result_int(), 201u);
  EXPECT_EQ(duplicate->response.result_int(), 201u);
  EXPECT_EQ(field(duplicate->response, "Idempotent-Replay"), "true");
  EXPECT_EQ(duplicate->response.body(), first->response.body());
  EXPECT_EQ(duplicate->trace.decision, http::decision::replay);
  EXPECT_EQ(upstream.executions, 1);
  EXPECT_EQ(waiting.load(), 0u);
}

TEST_F(Exchange, AWaitingDuplicateGets409WhenTheFirstOutlastsWaitTimeout) {
  policy.in_flight = core::InFlightPolicy::wait;
  policy.wait_timeout = 50ms;
  upstream.delay = 300ms;
  const auto first = start(request());
  const auto duplicate = start(request());
  run();
  EXPECT_EQ(duplicate->response.result_int(), 409u);
  EXPECT_EQ(duplicate->trace.decision, http::decision::in_flight);
  EXPECT_EQ(first->response.result_int(), 201u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, BeyondMaxWaitingADuplicateIs409AtOnce) {
  policy.in_flight = core::InFlightPolicy::wait;
  upstream.delay = 100ms;
  const auto first = start(request());
  waiting = config->options.limits.max_waiting;  // every waiting slot taken
  const auto duplicate = start(request());
  run();
  EXPECT_EQ(duplicate->response.result_int(), 409u);
  EXPECT_EQ(first->response.result_int(), 201u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, ANotProcessedStatusIsPassedThroughAndReleasesTheKey) {
  upstream.answer(503, "busy");
  const Answer first = send(request());
  EXPECT_EQ(first.response.result_int(), 503u);
  EXPECT_EQ(first.trace.decision, http::decision::released);
  const Answer retry = send(request());
  EXPECT_EQ(retry.response.result_int(), 201u);
  EXPECT_EQ(upstream.executions, 2);
}

TEST_F(Exchange, IdempotencyTransientOverridesTheStatusRuleAndIsStripped) {
  upstream.answer(503, "keep me", "false");
  const Answer kept = send(request());
  EXPECT_EQ(kept.response.result_int(), 503u);
  EXPECT_EQ(field(kept.response, "Idempotency-Transient"), "");
  EXPECT_EQ(send(request()).response.body(), "keep me");  // stored and replayed

  upstream.answer(200, "drop me", "true");
  const Answer released = send(request(R"({"amount":1})"), "k-2");
  EXPECT_EQ(released.trace.decision, http::decision::released);
  EXPECT_EQ(field(released.response, "Idempotency-Transient"), "");
  EXPECT_EQ(send(request(R"({"amount":1})"), "k-2").response.body(), "created-3");  // ran again
  EXPECT_EQ(upstream.executions, 3);
}

TEST_F(Exchange, AnyOtherStatusIsStoredAndReplayed) {
  upstream.answer(500, "boom");
  EXPECT_EQ(send(request()).response.result_int(), 500u);
  const Answer replay = send(request());
  EXPECT_EQ(replay.response.result_int(), 500u);
  EXPECT_EQ(replay.response.body(), "boom");
  EXPECT_EQ(field(replay.response, "Idempotent-Replay"), "true");
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, ABodyOverMaxStoredBodyReachesTheFirstClientAndRetriesGet409NamingTheStatus) {
  policy.max_stored_body = 4;
  upstream.answer(200, "longer than four");
  EXPECT_EQ(send(request()).response.body(), "longer than four");
  const Answer retry = send(request());
  EXPECT_EQ(retry.response.result_int(), 409u);
  EXPECT_EQ(retry.trace.decision, http::decision::too_large);
  EXPECT_NE(retry.response.body().find("response-too-large-to-replay"), std::string::npos);
  EXPECT_NE(retry.response.body().find("200"), std::string::npos);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, StoreUnavailableFailClosedIs503AndNothingIsForwarded) {
  for (StoreError error : {StoreError::unavailable, StoreError::busy, StoreError::internal}) {
    store_.next_claim = ScriptedStore::Fault{error, false};
    const Answer answer = send(request());
    EXPECT_EQ(answer.response.result_int(), 503u) << idem::core::store_error_name(error);
    EXPECT_EQ(answer.trace.decision, http::decision::store_unavailable);
    EXPECT_EQ(field(answer.response, "Retry-After"), "1");
  }
  EXPECT_EQ(upstream.executions, 0);
}

TEST_F(Exchange, StoreUnavailableFailOpenForwardsUncheckedButABusyStoreIsStill503) {
  policy.store_unavailable = core::StoreUnavailable::fail_open;
  store_.next_claim = ScriptedStore::Fault{StoreError::unavailable, false};
  const Answer open = send(request());
  EXPECT_EQ(open.response.result_int(), 201u);
  EXPECT_EQ(field(open.response, "Idempotency-Status"), "unchecked");
  EXPECT_EQ(open.trace.decision, http::decision::unchecked);
  store_.next_claim = ScriptedStore::Fault{StoreError::busy, false};
  EXPECT_EQ(send(request()).response.result_int(), 503u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, AClaimWhoseReplyWasLostIs503AndItsRecordIsReleasedInTheBackground) {
  policy.store_unavailable = core::StoreUnavailable::fail_open;  // never forwarded on reply_lost
  store_.next_claim = ScriptedStore::Fault{StoreError::reply_lost, true};
  const Answer lost = send(request());
  EXPECT_EQ(lost.response.result_int(), 503u);
  EXPECT_EQ(upstream.executions, 0);
  EXPECT_EQ(store_.memory.size(), 0u);  // the claim committed; the fenced release deleted it
  EXPECT_EQ(send(request()).response.result_int(), 201u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, ARetryWhileTheLostClaimIsStillBeingReleasedIs503NotAnUnknownOutcome) {
  // The claim committed and its reply was lost; the store then stays away for the first three
  // release attempts (100, 200, 400 ms). A retry in between, after the lease lapsed, must not read
  // the record as an unknown outcome (502, locked): the request never reached the upstream.
  store_.next_claim = ScriptedStore::Fault{StoreError::reply_lost, true};
  store_.releases_unavailable = 3;
  const auto lost = start(request());
  const auto retry = start_after(50ms, policy.lease + 1s, request());
  run();
  EXPECT_EQ(lost->response.result_int(), 503u);
  EXPECT_EQ(retry->response.result_int(), 503u) << retry->response.body();
  EXPECT_EQ(retry->trace.decision, http::decision::store_unavailable);
  EXPECT_EQ(upstream.executions, 0);
  // Once the release is through, the retry runs, once.
  EXPECT_EQ(store_.memory.size(), 0u);
  EXPECT_EQ(send(request()).response.result_int(), 201u);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, ACorruptRecordIs500NeverReplayedNeverExecuted) {
  store_.next_claim = ScriptedStore::Fault{StoreError::corrupt, false};
  const Answer answer = send(request());
  EXPECT_EQ(answer.response.result_int(), 500u);
  EXPECT_EQ(answer.trace.decision, http::decision::corrupt);
  EXPECT_NE(answer.response.body().find("record-corrupt"), std::string::npos);
  EXPECT_EQ(upstream.executions, 0);
}

TEST_F(Exchange, NothingSentUpstreamReleasesTheKeyWithItsOwnAnswer) {
  struct Case {
    UpstreamFailure failure;
    unsigned status;
    std::string_view type;
  };
  for (const Case& c : {Case{UpstreamFailure::connect_failed, 502, "upstream-unreachable"},
                        Case{UpstreamFailure::tls_failed, 502, "upstream-tls-failed"},
                        Case{UpstreamFailure::pool_exhausted, 503, "upstream-unreachable"}}) {
    const int before = upstream.executions;
    upstream.fail(c.failure);
    const Answer failed = send(request());
    EXPECT_EQ(failed.response.result_int(), c.status) << core::upstream_failure_name(c.failure);
    EXPECT_NE(failed.response.body().find(c.type), std::string::npos) << failed.response.body();
    EXPECT_EQ(failed.trace.decision, http::decision::released);
    EXPECT_EQ(store_.memory.size(), 0u);
    EXPECT_EQ(upstream.executions, before + 1);
  }
  EXPECT_EQ(send(request()).response.result_int(), 201u);
}

TEST_F(Exchange, AnUpstreamTimeoutUnderLockIs504ThenEveryRetryIs502OutcomeUnknown) {
  upstream.fail(UpstreamFailure::timeout);
  const Answer first = send(request());
  EXPECT_EQ(first.response.result_int(), 504u);
  EXPECT_EQ(first.trace.decision, http::decision::unknown);
  clock.advance(policy.lease + 1s);
  const Answer retry = send(request());
  EXPECT_EQ(retry.response.result_int(), 502u);
  EXPECT_NE(retry.response.body().find("outcome-unknown"), std::string::npos);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, AnUpstreamTimeoutUnderRetryStaysInFlightThenTheRetryAfterTheLeaseRunsAgain) {
  policy.unknown_outcome = core::UnknownOutcome::retry;
  upstream.fail(UpstreamFailure::timeout);
  EXPECT_EQ(send(request()).response.result_int(), 504u);
  EXPECT_EQ(send(request()).response.result_int(), 409u);  // lease still running
  clock.advance(policy.lease + 1s);
  const Answer retry = send(request());
  EXPECT_EQ(retry.response.result_int(), 201u);
  EXPECT_EQ(upstream.executions, 2);
}

TEST_F(Exchange, ABrokenResponseAfterTheRequestWentOutIs502AndTheOutcomeUnknown) {
  for (UpstreamFailure failure :
       {UpstreamFailure::connection_lost, UpstreamFailure::bad_response, UpstreamFailure::switched_protocols}) {
    const std::string key = std::string(core::upstream_failure_name(failure));
    upstream.fail(failure);
    const Answer first = send(request(), key);
    EXPECT_EQ(first.response.result_int(), 502u) << key;
    EXPECT_NE(first.response.body().find("upstream-bad-response"), std::string::npos);
    const Answer retry = send(request(), key);
    EXPECT_EQ(retry.response.result_int(), 502u);
    EXPECT_NE(retry.response.body().find("outcome-unknown"), std::string::npos) << key;
  }
  EXPECT_EQ(upstream.executions, 3);
}

TEST_F(Exchange, AResponseBeyondMaxResponseBodyIs502AndRetriesGet409NeverARerun) {
  upstream.fail(UpstreamFailure::response_too_large, 200);
  EXPECT_EQ(send(request()).response.result_int(), 502u);
  const Answer retry = send(request());
  EXPECT_EQ(retry.response.result_int(), 409u);
  EXPECT_NE(retry.response.body().find("response-too-large-to-replay"), std::string::npos);
  EXPECT_EQ(upstream.executions, 1);
}

TEST_F(Exchange, ACompletionWhoseReplyWasLostStillAnswersTheClientAndIsRecoveredInTheBackground) {
  use_local_cache(0);
  store_.next_complete = ScriptedStore::Fault{StoreError::reply_lost, false};  // did not commit
  const Answer first = send(request());
  EXPECT_EQ(first.response.result_int(), 201u);
  // The background retry (run to its end by send) completed the record: the retry replays.
  const Answer retry = send(request());
  EXPECT_EQ(retry.response.body(), "created-1");
  EXPECT_EQ(field(retry.response, "Idempotent-Replay"), "true");
  EXPECT_EQ(upstream.executions, 1);
  EXPECT_EQ(background.count(), 0u);
}

// Fingerprint v2: JSON numbers by their exact value. Two account numbers one double holds are two
// requests; the second under the same key is a 422, not the first's replay.
TEST_F(Exchange, TwoAccountNumbersBeyondDoublePrecisionAreDifferentRequests) {
  const Answer first = send(request(R"({"account":12345678901234567890})"));
  EXPECT_EQ(first.response.result_int(), 201u);
  const Answer second = send(request(R"({"account":12345678901234567891})"));
  EXPECT_EQ(second.response.result_int(), 422u);
  EXPECT_EQ(second.trace.decision, http::decision::mismatch);
  // The same value spelled differently is the same request.
  const Answer retry = send(request(R"({"account":1234567890123456789e1})"));
  EXPECT_EQ(retry.trace.decision, http::decision::replay);
  EXPECT_EQ(upstream.executions, 1);
}

// Records made before the upgrade carry "v1:" fingerprints: compared in v1, they keep matching
// their retries (replay) and keep telling different requests apart (422) during their ttl.
TEST_F(Exchange, AV1RecordFromBeforeTheUpgradeStillMatchesItsRequest) {
  use_local_cache(0);
  put_v1_record(request(R"({"amount":100.0})"), true);
  const Answer retry = send(request(R"({"amount":100})"));
  EXPECT_EQ(retry.trace.decision, http::decision::replay);
  EXPECT_EQ(retry.response.body(), "created-before-the-upgrade");
  const Answer other = send(request(R"({"amount":999})"));
  EXPECT_EQ(other.response.result_int(), 422u);
  EXPECT_EQ(upstream.executions, 0);
  // Replays from the in-process cache compare in v1 too.
  use_local_cache(1 << 20);
  EXPECT_EQ(send(request(R"({"amount":1e2})")).trace.decision, http::decision::replay);
  EXPECT_EQ(send(request(R"({"amount":1e2})")).trace.decision, http::decision::replay);
  EXPECT_EQ(send(request(R"({"amount":999})")).response.result_int(), 422u);
  EXPECT_EQ(upstream.executions, 0);
}

// unknown_outcome: retry: this request's v1 record, in flight when its proxy died, is taken over
// after its lease like a v2 one (the claim offers the v1 fingerprint), and claimed anew in v2.
TEST_F(Exchange, AV1InFlightRecordWhoseLeaseLapsedIsTakenOverByTheSameRequest) {
  policy.unknown_outcome = core::UnknownOutcome::retry;
  put_v1_record(request(), false);
  EXPECT_EQ(send(request()).response.result_int(), 409u);  // lease still running
  clock.advance(policy.lease + 1s);
  EXPECT_EQ(send(request(R"({"amount":999})")).response.result_int(), 422u);  // never another request
  const Answer retry = send(request());
  EXPECT_EQ(retry.response.result_int(), 201u);
  EXPECT_EQ(retry.trace.decision, http::decision::executed);
  EXPECT_EQ(upstream.executions, 1);
  use_local_cache(0);
  EXPECT_EQ(send(request()).trace.decision, http::decision::replay);  // the new record is v2
  EXPECT_EQ(send(request(R"({"amount":999})")).response.result_int(), 422u);
}

}  // namespace
