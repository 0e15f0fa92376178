// The Redis side of the shared replay cache, in process against real redis-servers: the
// connection's two deadlines, the session's set-up and reconnects, and RedisReplayCache's
// lookups and writes (hits, misses, deadlines, corrupt values, lifetimes).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/proxy_metrics.hpp"
#include "cache/redis_record.hpp"
#include "cache/redis_replay_cache.hpp"
#include "redis/connection.hpp"
#include "redis/session.hpp"
#include "support/ports.hpp"
#include "support/private_redis.hpp"
#include "support/redis_client.hpp"
#include "support/temp_dir.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using idem::cache::CachedRecord;
using idem::cache::SharedFallbackReason;
using idem::cache::SharedLookup;
using idem::cache::SharedLookupOutcome;
using redis::RedisConnection;
using redis::RedisError;
using redis::RedisErrorKind;
using redis::RedisReply;

class RedisInProcess : public ::testing::Test {
 protected:
  // Runs the io_context until `done` holds or `timeout` passes; whether `done` held.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = Clock::now() + timeout;
    while (!done() && Clock::now() < deadline) {
      io_.run_for(2ms);
      if (io_.stopped()) io_.restart();
    }
    return done();
  }
  void run_for(std::chrono::milliseconds duration) {
    run_until([] { return false; }, duration);
  }

  std::shared_ptr<RedisConnection> connect(std::uint16_t port) {
    auto connection = std::make_shared<RedisConnection>(io_, [this](RedisError why) { lost_.push_back(why); });
    std::optional<RedisError> result;
    connection->connect("127.0.0.1", port, 2s, [&](RedisError error) { result = error; });
    EXPECT_TRUE(run_until([&] { return result.has_value(); }));
    EXPECT_TRUE(result && result->ok()) << (result ? result->message : "no answer");
    return connection;
  }

  boost::asio::io_context io_;
  TempDir dir_{"idem-redis-it"};
  std::vector<RedisError> lost_;
};

// --- RedisConnection: the two deadlines -----------------------------------------------------------

TEST_F(RedisInProcess, FirstDeadlineAnswersTimeoutAndKeepsTheConnection) {
  PrivateRedis server(dir_.path() / "redis");
  auto connection = connect(server.port());
  server.pause();

  std::optional<RedisError> answer;
  const auto sent = Clock::now();
  Clock::time_point answered;
  connection->command({"PING"}, 20ms, 10s, [&](RedisError error, RedisReply) {
    answer = error;
    answered = Clock::now();
  });
  ASSERT_TRUE(run_until([&] { return answer.has_value(); }, 5s));
  EXPECT_EQ(answer->kind, RedisErrorKind::timeout) << answer->message;
  EXPECT_GE(answered - sent, 20ms);
  EXPECT_LT(answered - sent, 500ms) << "answered at the first deadline, not the second";
  EXPECT_TRUE(connection->connected());
  EXPECT_TRUE(connection->overdue());

  // The late reply is read and dropped; the next command gets its own reply.
  server.resume();
  ASSERT_TRUE(run_until([&] { return !connection->overdue(); }, 5s));
  std::optional<RedisReply> pong;
  connection->command({"ECHO", "after"}, 2s, 2s, [&](RedisError error, RedisReply reply) {
    EXPECT_TRUE(error.ok()) << error.message;
    pong = std::move(reply);
  });
  ASSERT_TRUE(run_until([&] { return pong.has_value(); }));
  EXPECT_EQ(pong->text, "after") << "replies stay matched to their commands";
  EXPECT_TRUE(lost_.empty());
  connection->close();
}

TEST_F(RedisInProcess, ReplyStillMissingAtTheSecondDeadlineClosesTheConnection) {
  PrivateRedis server(dir_.path() / "redis");
  auto connection = connect(server.port());
  server.pause();
  std::optional<RedisError> answer;
  const auto sent = Clock::now();
  connection->command({"PING"}, 10ms, 300ms, [&](RedisError error, RedisReply) { answer = error; });
  ASSERT_TRUE(run_until([&] { return !lost_.empty(); }, 5s));
  EXPECT_GE(Clock::now() - sent, 300ms);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind, RedisErrorKind::timeout);
  EXPECT_EQ(lost_.front().kind, RedisErrorKind::timeout);
  EXPECT_FALSE(connection->connected());
  EXPECT_FALSE(connection->overdue());
  server.resume();
}

// --- RedisSession ---------------------------------------------------------------------------------

class SessionTest : public RedisInProcess {
 protected:
  std::shared_ptr<redis::RedisSession> make_session(std::uint16_t port, std::string password = "",
                                                    unsigned database = 0) {
    redis::RedisSessionOptions options;
    options.host = "127.0.0.1";
    options.port = port;
    options.password = std::move(password);
    options.database = database;
    options.connect_timeout = 200ms;
    options.min_backoff = 20ms;
    options.max_backoff = 200ms;
    return std::make_shared<redis::RedisSession>(io_, options, [this](bool ready) { states_.push_back(ready); });
  }
  std::optional<RedisReply> run_command(redis::RedisSession& session, std::vector<std::string> argv,
                                        RedisError* error_out = nullptr) {
    std::optional<RedisReply> reply;
    bool answered = false;
    session.command(std::move(argv), 2s, 2s, [&](RedisError error, RedisReply value) {
      if (error_out != nullptr) *error_out = error;
      if (error.ok()) reply = std::move(value);
      answered = true;
    });
    EXPECT_TRUE(run_until([&] { return answered; }));
    return reply;
  }

  std::vector<bool> states_;
};

TEST_F(SessionTest, AuthenticatesAndSelectsItsDatabase) {
  PrivateRedis server(dir_.path() / "redis", {"--requirepass", "s3cret-pw"});
  auto session = make_session(server.port(), "s3cret-pw", 3);
  session->start();
  ASSERT_TRUE(run_until([&] { return session->ready(); }));
  const auto set = run_command(*session, {"SET", "session-key", "in-db-3"});
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->text, "OK");

  RedisClient client(server.port(), "s3cret-pw");
  EXPECT_EQ(client.command({"GET", "session-key"}).kind, RedisReply::Kind::nil) << "not in database 0";
  ASSERT_EQ(client.command({"SELECT", "3"}).text, "OK");
  EXPECT_EQ(client.command({"GET", "session-key"}).text, "in-db-3");
  EXPECT_EQ(states_, std::vector<bool>{true});
  session->stop();
  EXPECT_EQ(states_, (std::vector<bool>{true, false}));
}

TEST_F(SessionTest, WrongPasswordNeverBecomesReadyAndCommandsFailAtOnce) {
  PrivateRedis server(dir_.path() / "redis", {"--requirepass", "s3cret-pw"});
  auto session = make_session(server.port(), "wrong-pw");
  session->start();
  run_for(1s);  // several attempts, with backoff
  EXPECT_FALSE(session->ready());
  EXPECT_TRUE(states_.empty());
  RedisError error;
  const auto started = Clock::now();
  EXPECT_FALSE(run_command(*session, {"PING"}, &error).has_value());
  EXPECT_EQ(error.kind, RedisErrorKind::unavailable);
  EXPECT_LT(Clock::now() - started, 100ms) << "no waiting for a connection";
  session->stop();
}

TEST_F(SessionTest, ReconnectsAfterTheServerComesBack) {
  PrivateRedis server(dir_.path() / "redis");
  auto session = make_session(server.port());
  session->start();
  ASSERT_TRUE(run_until([&] { return session->ready(); }));
  server.kill();
  ASSERT_TRUE(run_until([&] { return !session->ready(); }, 5s));
  run_for(300ms);  // attempts fail while it is gone
  EXPECT_FALSE(session->ready());
  server.restart();
  ASSERT_TRUE(run_until([&] { return session->ready(); }, 10s)) << server.describe();
  EXPECT_EQ(states_, (std::vector<bool>{true, false, true}));
  const auto pong = run_command(*session, {"PING"});
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->text, "PONG");
  session->stop();
}

TEST_F(SessionTest, StoppedServerIsNotUpUntilItAnswers) {
  PrivateRedis server(dir_.path() / "redis");
  server.pause();  // the kernel still accepts connections; nothing answers PING
  auto session = make_session(server.port());
  session->start();
  run_for(1s);
  EXPECT_FALSE(session->ready());
  server.resume();
  ASSERT_TRUE(run_until([&] { return session->ready(); }, 10s));
  session->stop();
}

TEST_F(SessionTest, StopLeavesTheIoContextWithoutWork) {
  auto session = make_session(free_port());
  session->start();
  run_for(100ms);  // failing attempts, a backoff timer armed
  session->stop();
  io_.restart();
  const auto started = Clock::now();
  io_.run();  // returns only when no timer or socket wait is left
  EXPECT_LT(Clock::now() - started, 1s);
}

// --- RedisReplayCache -----------------------------------------------------------------------------

class ReplayCacheTest : public RedisInProcess {
 protected:
  ReplayCacheTest() {
    metrics_.track_redis_cache(1);
    options_.key_prefix = unique_prefix("it-cache");
    // Generous: hits must not turn into timeouts on a loaded machine. The deadline has its own test.
    options_.timeout = 250ms;
  }

  std::unique_ptr<idem::cache::RedisReplayCache> make_cache(std::uint16_t port,
                                                     std::shared_ptr<const crypto::Keyring> keyring = nullptr) {
    options_.host = "127.0.0.1";
    options_.port = port;
    options_.connect_timeout = 300ms;
    auto cache = std::make_unique<idem::cache::RedisReplayCache>(io_, options_, std::move(keyring), metrics_);
    cache->start();
    EXPECT_TRUE(run_until([&] { return up(); })) << metrics_.registry().render();
    return cache;
  }
  bool up() { return metric("idemproxy_redis_up") == 1.0; }
  double metric(const std::string& series) {
    const std::string text = metrics_.registry().render();
    for (std::size_t at = text.find(series + " "); at != std::string::npos; at = text.find(series + " ", at + 1)) {
      if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
    }
    return -1;
  }
  double fallbacks(std::string_view reason) {
    return metric("idemproxy_redis_cache_fallbacks_total{reason=\"" + std::string(reason) + "\"}");
  }
  SharedLookup lookup(idem::cache::RedisReplayCache& cache, std::string_view key, std::chrono::milliseconds* took = nullptr) {
    std::optional<SharedLookup> result;
    const auto started = Clock::now();
    Clock::time_point answered;
    cache.lookup(kScope, key, [&](SharedLookup found) {
      result = std::move(found);
      answered = Clock::now();
    });
    EXPECT_TRUE(run_until([&] { return result.has_value(); }, 5s));
    if (took != nullptr) *took = std::chrono::duration_cast<std::chrono::milliseconds>(answered - started);
    return result.value_or(SharedLookup{});
  }
  static std::shared_ptr<CachedRecord> record(std::string body, std::chrono::milliseconds lifetime = 1h) {
    auto r = std::make_shared<CachedRecord>();
    r->fingerprint = "v1:feedbeef";
    r->response.status = 201;
    r->response.headers = {{"Content-Type", "application/json"}, {"Location", "/orders/9"}};
    r->response.body = std::move(body);
    r->expires_at = Clock::now() + lifetime;
    return r;
  }
  // Puts and waits until Redis acknowledged the write.
  void put_and_wait(idem::cache::RedisReplayCache& cache, std::string_view key, std::shared_ptr<CachedRecord> r) {
    const double before = metric("idemproxy_redis_cache_writes_total");
    cache.put(kScope, key, std::move(r));
    ASSERT_TRUE(run_until([&] { return metric("idemproxy_redis_cache_writes_total") == before + 1; }, 5s));
  }
  std::string redis_key(std::string_view key) const { return idem::cache::redis_record_key(options_.key_prefix, kScope, key); }

  static constexpr std::string_view kScope = "orders/v1:tenant";
  http::ProxyMetrics metrics_;
  idem::cache::RedisCacheOptions options_;
};

TEST_F(ReplayCacheTest, PutThenLookupIsAHitWithTheSameRecord) {
  auto cache = make_cache(suite_redis_port());
  const auto stored = record(R"({"id":9})");
  put_and_wait(*cache, "k-hit", stored);
  const SharedLookup found = lookup(*cache, "k-hit");
  ASSERT_EQ(found.outcome, SharedLookupOutcome::hit);
  ASSERT_NE(found.record, nullptr);
  EXPECT_EQ(found.record->fingerprint, stored->fingerprint);
  EXPECT_EQ(found.record->state, core::RecordState::completed);
  EXPECT_EQ(found.record->response.status, 201);
  EXPECT_EQ(found.record->response.headers, stored->response.headers);
  EXPECT_EQ(found.record->response.body, stored->response.body);
  EXPECT_LE(found.record->expires_at, stored->expires_at) << "never outlives the record";
  EXPECT_GT(found.record->expires_at, Clock::now() + 59min);
  EXPECT_EQ(metric("idemproxy_redis_cache_hits_total"), 1.0);
  EXPECT_EQ(metric("idemproxy_redis_cache_misses_total"), 0.0);

  RedisClient client(suite_redis_port());
  const RedisReply pttl = client.command({"PTTL", redis_key("k-hit")});
  EXPECT_GT(pttl.integer, 0);
  EXPECT_LE(pttl.integer, 3'600'000);
  cache->stop();
}

TEST_F(ReplayCacheTest, AbsentKeyIsAMiss) {
  auto cache = make_cache(suite_redis_port());
  EXPECT_EQ(lookup(*cache, "never-written").outcome, SharedLookupOutcome::miss);
  EXPECT_EQ(metric("idemproxy_redis_cache_misses_total"), 1.0);
  cache->stop();
}

TEST_F(ReplayCacheTest, HitLifetimeIsBoundedByTheKeysTtl) {
  auto cache = make_cache(suite_redis_port());
  put_and_wait(*cache, "k-ttl", record("body"));
  RedisClient client(suite_redis_port());
  ASSERT_EQ(client.command({"PEXPIRE", redis_key("k-ttl"), "5000"}).integer, 1);
  const SharedLookup found = lookup(*cache, "k-ttl");
  ASSERT_EQ(found.outcome, SharedLookupOutcome::hit);
  EXPECT_LE(found.record->expires_at, Clock::now() + 5s) << "the key's PTTL bounds the copy, not only the value";
  cache->stop();
}

TEST_F(ReplayCacheTest, PausedRedisCostsOneDeadlineThenNothing) {
  PrivateRedis server(dir_.path() / "redis");
  options_.timeout = 20ms;
  auto cache = make_cache(server.port());
  put_and_wait(*cache, "k-paused", record("body"));
  server.pause();

  std::chrono::milliseconds first{};
  const SharedLookup timed_out = lookup(*cache, "k-paused", &first);
  EXPECT_EQ(timed_out.outcome, SharedLookupOutcome::fallback);
  EXPECT_EQ(timed_out.reason, SharedFallbackReason::timeout);
  EXPECT_GE(first, 20ms);
  EXPECT_LT(first, 250ms);

  // The reply is overdue: the next lookups do not wait again.
  std::chrono::milliseconds second{};
  const SharedLookup at_once = lookup(*cache, "k-paused", &second);
  EXPECT_EQ(at_once.outcome, SharedLookupOutcome::fallback);
  EXPECT_EQ(at_once.reason, SharedFallbackReason::timeout);
  EXPECT_LT(second, first);
  EXPECT_EQ(fallbacks("timeout"), 2.0);

  server.resume();
  ASSERT_TRUE(run_until([&] { return lookup(*cache, "k-paused").outcome == SharedLookupOutcome::hit; }, 10s));
  cache->stop();
}

TEST_F(ReplayCacheTest, UnreachableRedisFallsBackAtOnce) {
  PrivateRedis server(dir_.path() / "redis");
  auto cache = make_cache(server.port());
  server.kill();
  ASSERT_TRUE(run_until([&] { return !up(); }, 5s));
  std::chrono::milliseconds took{};
  const SharedLookup found = lookup(*cache, "k-any", &took);
  EXPECT_EQ(found.outcome, SharedLookupOutcome::fallback);
  EXPECT_EQ(found.reason, SharedFallbackReason::disconnected);
  EXPECT_LT(took, 100ms);
  EXPECT_EQ(fallbacks("disconnected"), 1.0);
  cache->put(kScope, "k-any", record("body"));  // dropped, not queued
  server.restart();
  ASSERT_TRUE(run_until([&] { return up(); }, 10s));
  EXPECT_EQ(lookup(*cache, "k-any").outcome, SharedLookupOutcome::miss);
  cache->stop();
}

TEST_F(ReplayCacheTest, CorruptValueIsAFallbackNeverAHit) {
  auto cache = make_cache(suite_redis_port());
  RedisClient client(suite_redis_port());
  client.command({"SET", redis_key("k-junk"), "IDRC\x01 definitely not a record", "PX", "60000"});
  const SharedLookup found = lookup(*cache, "k-junk");
  EXPECT_EQ(found.outcome, SharedLookupOutcome::fallback);
  EXPECT_EQ(found.reason, SharedFallbackReason::corrupt);
  EXPECT_EQ(found.record, nullptr);
  EXPECT_EQ(fallbacks("corrupt"), 1.0);

  // Another type under the key: an error reply, also a fallback.
  client.command({"DEL", redis_key("k-list")});
  client.command({"LPUSH", redis_key("k-list"), "x"});
  const SharedLookup wrong_type = lookup(*cache, "k-list");
  EXPECT_EQ(wrong_type.outcome, SharedLookupOutcome::fallback);
  EXPECT_EQ(wrong_type.reason, SharedFallbackReason::error);
  client.command({"DEL", redis_key("k-list")});
  cache->stop();
}

TEST_F(ReplayCacheTest, EncryptedValuesHoldNoBodyAndOtherKeysCannotOpenThem) {
  crypto::AeadKey key{};
  key.fill(42);
  auto keyring = std::make_shared<const crypto::Keyring>("k1", std::vector<crypto::Keyring::Entry>{{"k1", key}});
  auto cache = make_cache(suite_redis_port(), keyring);
  put_and_wait(*cache, "k-sealed", record(R"({"secret":"PAN-4111"})"));
  RedisClient client(suite_redis_port());
  const RedisReply raw = client.command({"GET", redis_key("k-sealed")});
  ASSERT_EQ(raw.kind, RedisReply::Kind::string);
  EXPECT_EQ(raw.text.find("PAN-4111"), std::string::npos);
  EXPECT_EQ(raw.text.find("/orders/9"), std::string::npos);
  const SharedLookup found = lookup(*cache, "k-sealed");
  ASSERT_EQ(found.outcome, SharedLookupOutcome::hit);
  EXPECT_EQ(found.record->response.body, R"({"secret":"PAN-4111"})");
  cache->stop();

  // A process with other keys sees a corrupt value, not a replay.
  crypto::AeadKey other{};
  other.fill(43);
  auto other_cache = make_cache(suite_redis_port(), std::make_shared<const crypto::Keyring>(
                                                        "k1", std::vector<crypto::Keyring::Entry>{{"k1", other}}));
  const SharedLookup refused = lookup(*other_cache, "k-sealed");
  EXPECT_EQ(refused.outcome, SharedLookupOutcome::fallback);
  EXPECT_EQ(refused.reason, SharedFallbackReason::corrupt);
  other_cache->stop();
}

TEST_F(ReplayCacheTest, ShortLivedAndOversizedRecordsAreNotWritten) {
  options_.max_value_bytes = 1024;
  auto cache = make_cache(suite_redis_port());
  cache->put(kScope, "k-short", record("body", 500ms));
  cache->put(kScope, "k-big", record(std::string(2048, 'x')));
  put_and_wait(*cache, "k-fits", record(std::string(512, 'y')));  // written after the two above
  RedisClient client(suite_redis_port());
  EXPECT_EQ(client.command({"EXISTS", redis_key("k-short")}).integer, 0);
  EXPECT_EQ(client.command({"EXISTS", redis_key("k-big")}).integer, 0);
  EXPECT_EQ(client.command({"EXISTS", redis_key("k-fits")}).integer, 1);
  EXPECT_EQ(metric("idemproxy_redis_cache_writes_total"), 1.0);
  cache->stop();
}

}  // namespace
}  // namespace idem::test
