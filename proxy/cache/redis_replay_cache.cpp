#include "cache/redis_replay_cache.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <utility>

#include "crypto/sha256.hpp"
#include "log/log.hpp"
#include "redis/session.hpp"

namespace idem::cache {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Taken off every copy's lifetime. PX counts from when Redis reads the SET, a little after the
// lifetime was measured (sealing, the write queue, the network): without a margin the copy could
// outlive the record by that much.
constexpr milliseconds kExpiryMargin{1'000};
// A copy that would live less than this is not worth a write (and a replay that late is rare).
constexpr milliseconds kMinCopyLifetime{1'000};
constexpr milliseconds kWarningInterval{1'000};

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

SharedFallbackReason reason_for(redis::RedisErrorKind kind) {
  switch (kind) {
    case redis::RedisErrorKind::timeout: return SharedFallbackReason::timeout;
    case redis::RedisErrorKind::unavailable: return SharedFallbackReason::disconnected;
    case redis::RedisErrorKind::ok:
    case redis::RedisErrorKind::internal: return SharedFallbackReason::error;
  }
  return SharedFallbackReason::error;
}

SharedLookup fallback(SharedFallbackReason reason) {
  SharedLookup result;
  result.outcome = SharedLookupOutcome::fallback;
  result.reason = reason;
  return result;
}

// Logs never carry the raw key (the same hash as the access log's key_sha256).
std::string key_hash(std::string_view key) { return crypto::to_hex(crypto::sha256(key)).substr(0, 16); }

}  // namespace

struct RedisReplayCache::Lookup {
  std::string scope;
  std::string key;
  SharedLookupHandler handler;
  int outstanding = 2;  // GET and PTTL
  redis::RedisError get_error;
  redis::RedisReply get_reply;
  redis::RedisError ttl_error;
  redis::RedisReply ttl_reply;
};

RedisReplayCache::RedisReplayCache(boost::asio::io_context& io, RedisCacheOptions options,
                                   std::shared_ptr<const crypto::Keyring> keyring, SharedCacheObserver& metrics)
    : io_(io), options_(std::move(options)), codec_(std::move(keyring)), metrics_(metrics) {
  redis::RedisSessionOptions session;
  session.host = options_.host;
  session.port = options_.port;
  session.password = options_.password;
  session.database = options_.database;
  session.connect_timeout = options_.connect_timeout;
  session.component = "redis_replay_cache";
  session_ = std::make_shared<redis::RedisSession>(io_, std::move(session),
                                                   [&metrics](bool ready) { metrics.redis_connection_up(ready); });
}

RedisReplayCache::~RedisReplayCache() { session_->stop(); }

void RedisReplayCache::start() { session_->start(); }

void RedisReplayCache::stop() { session_->stop(); }

void RedisReplayCache::lookup(std::string_view scope, std::string_view key, SharedLookupHandler handler) {
  if (!session_->ready() || session_->overdue()) {
    const SharedFallbackReason reason =
        session_->ready() ? SharedFallbackReason::timeout : SharedFallbackReason::disconnected;
    metrics_.redis_lookup(SharedLookupOutcome::fallback, reason);
    boost::asio::post(io_, [handler = std::move(handler), reason] { handler(fallback(reason)); });
    return;
  }
  auto lookup = std::make_shared<Lookup>();
  lookup->scope = std::string(scope);
  lookup->key = std::string(key);
  lookup->handler = std::move(handler);
  const std::string redis_key = redis_record_key(options_.key_prefix, scope, key);
  // The first deadline answers the request; the second gives up on the connection.
  const milliseconds close_after = std::max(options_.timeout, options_.connect_timeout);
  session_->command({"GET", redis_key}, options_.timeout, close_after,
                    [this, lookup](redis::RedisError error, redis::RedisReply reply) {
                      lookup->get_error = std::move(error);
                      lookup->get_reply = std::move(reply);
                      if (--lookup->outstanding == 0) finish(*lookup);
                    });
  session_->command({"PTTL", redis_key}, options_.timeout, close_after,
                    [this, lookup](redis::RedisError error, redis::RedisReply reply) {
                      lookup->ttl_error = std::move(error);
                      lookup->ttl_reply = std::move(reply);
                      if (--lookup->outstanding == 0) finish(*lookup);
                    });
}

void RedisReplayCache::finish(Lookup& lookup) {
  SharedLookup result;
  if (!lookup.get_error.ok()) {
    result = fallback(reason_for(lookup.get_error.kind));
  } else if (lookup.get_reply.kind == redis::RedisReply::Kind::nil) {
    result.outcome = SharedLookupOutcome::miss;
  } else if (lookup.get_reply.kind != redis::RedisReply::Kind::string) {
    // An error reply (NOAUTH, WRONGTYPE, OOM, ...) or anything a GET should not answer.
    if (warning_allowed()) {
      log::warn("redis_cache_error", {{"reply", redis::describe(lookup.get_reply)},
                                      {"key_sha256", key_hash(lookup.key)},
                                      {"suppressed", static_cast<std::int64_t>(warnings_suppressed_)}});
      warnings_suppressed_ = 0;
    }
    result = fallback(SharedFallbackReason::error);
  } else {
    result = open_value(lookup);
  }
  metrics_.redis_lookup(result.outcome, result.reason);
  SharedLookupHandler handler = std::move(lookup.handler);
  handler(std::move(result));
}

SharedLookup RedisReplayCache::open_value(const Lookup& lookup) {
  RedisRecordCodec::Opened opened = codec_.open(lookup.scope, lookup.key, lookup.get_reply.text);
  if (opened.problem != RedisValueProblem::none) {
    if (warning_allowed()) {
      log::warn("redis_cache_corrupt", {{"problem", redis_value_problem_name(opened.problem)},
                                        {"detail", opened.detail},
                                        {"key_sha256", key_hash(lookup.key)},
                                        {"value_bytes", lookup.get_reply.text.size()},
                                        {"suppressed", static_cast<std::int64_t>(warnings_suppressed_)}});
      warnings_suppressed_ = 0;
    }
    return fallback(SharedFallbackReason::corrupt);
  }
  milliseconds remaining{opened.record.expires_at_unix_ms - unix_now_ms()};
  // PTTL: -2 the key is gone by now, -1 it has no expiry (not written by us); both leave the
  // value's own expiry as the only bound. A failed PTTL does the same.
  if (lookup.ttl_error.ok() && lookup.ttl_reply.kind == redis::RedisReply::Kind::integer &&
      lookup.ttl_reply.integer >= 0) {
    remaining = std::min(remaining, milliseconds{lookup.ttl_reply.integer});
  }
  if (remaining <= milliseconds::zero()) return SharedLookup{};  // expired: a miss
  auto record = std::make_shared<CachedRecord>();
  record->fingerprint = std::move(opened.record.fingerprint);
  record->state = opened.record.state;
  record->response = std::move(opened.record.response);
  record->expires_at = SteadyClock::now() + remaining;
  SharedLookup result;
  result.outcome = SharedLookupOutcome::hit;
  result.record = std::move(record);
  return result;
}

void RedisReplayCache::put(std::string_view scope, std::string_view key, std::shared_ptr<const CachedRecord> record) {
  if (!session_->ready() || session_->overdue()) return;
  if (record->state != core::RecordState::completed && record->state != core::RecordState::too_large) return;
  // Sealing and encoding wait until the request's coroutine has handed its response on.
  boost::asio::post(io_, [this, scope = std::string(scope), key = std::string(key), record = std::move(record)] {
    write(scope, key, *record);
  });
}

void RedisReplayCache::write(const std::string& scope, const std::string& key, const CachedRecord& record) {
  if (!session_->ready() || session_->overdue()) return;
  const auto remaining =
      std::chrono::duration_cast<milliseconds>(record.expires_at - SteadyClock::now()) - kExpiryMargin;
  if (remaining < kMinCopyLifetime) return;
  if (record.response.body.size() > options_.max_value_bytes) return;  // the value only adds to it

  RedisRecord value_of;
  value_of.state = record.state;
  value_of.fingerprint = record.fingerprint;
  value_of.response = record.response;
  // The writer's clock; readers also take the key's PTTL, which Redis counts from its own.
  value_of.expires_at_unix_ms = unix_now_ms() + remaining.count();
  std::optional<std::string> value = codec_.seal(scope, key, value_of);
  if (!value) {
    log::error("redis_cache_seal_failed", {{"key_sha256", key_hash(key)}});
    return;
  }
  if (value->size() > options_.max_value_bytes) return;
  const milliseconds deadline = std::max(options_.timeout, options_.connect_timeout);
  session_->command(
      {"SET", redis_record_key(options_.key_prefix, scope, key), std::move(*value), "PX",
       std::to_string(remaining.count())},
      deadline, deadline, [this](const redis::RedisError& error, const redis::RedisReply& reply) {
        metrics_.redis_write(error.ok() && reply.kind == redis::RedisReply::Kind::status && reply.text == "OK");
      });
}

bool RedisReplayCache::warning_allowed() {
  const auto now = SteadyClock::now();
  if (now - last_warning_ < kWarningInterval) {
    ++warnings_suppressed_;
    return false;
  }
  last_warning_ = now;
  return true;
}

}  // namespace idem::cache
