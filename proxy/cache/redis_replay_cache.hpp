#pragma once
// The shared replay cache in Redis: SharedReplayCache over one RedisSession per worker (one
// connection per io_context, never shared across threads). Layout of keys and values in
// redis_record.hpp.
//
// lookup: GET and PTTL of the record's key, pipelined, under a hard deadline of
//   store.redis.timeout kept by an Asio timer (hiredis 0.14 has no timer hook): past it the lookup
//   answers fallback/timeout at once, the connection stays, and the late replies are read and
//   dropped when they come. While such a reply is overdue, or while there is no connection, a
//   lookup answers fallback at once without sending anything, so a slow or absent Redis costs a
//   request at most one deadline. A reply still missing after connect_timeout closes the
//   connection; the session reconnects with capped backoff. A value that does not decode or does
//   not open is a fallback (corrupt), logged (rate-limited), never replayed; the store's answer then
//   overwrites it. The hit's lifetime is the shorter of the value's expiry and the key's PTTL, so a
//   copy put into the in-process cache never outlives the record, whatever the writer's clock.
// put: SET key value PX <remaining lifetime in ms, less a one-second margin for the time the write
//   takes to reach Redis>, fire and forget; skipped while not connected or overdue, when the copy
//   would live less than a second, or when the value would exceed max_value_bytes.
//
// Threading: one per worker; construct, use and destroy on the worker's io thread. Handlers it
// hands to Redis refer to this object: destroy it only once io.run() has returned (stop() first,
// so that the io_context can run out of work).
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "crypto/keyring.hpp"
#include "cache/redis_record.hpp"
#include "cache/shared_replay_cache.hpp"

namespace idem::redis {
class RedisSession;
}

namespace idem::cache {

// store.redis, as the cache uses it.
struct RedisCacheOptions {
  std::string host;  // an address or a name
  std::uint16_t port = 6379;
  std::string password;                            // AUTH on connect when not empty
  unsigned database = 0;                           // SELECT on connect when not 0
  std::chrono::milliseconds connect_timeout{500};  // and the limit on a reply overdue before the connection is closed
  std::chrono::milliseconds timeout{5};            // deadline per lookup
  std::string key_prefix = "idemproxy:replay:";
  std::size_t max_value_bytes = 1024 * 1024;  // larger responses are not copied to Redis
};

class RedisReplayCache final : public SharedReplayCache {
 public:
  // `keyring` null: encryption at rest is off. `metrics` (the proxy's: ProxyMetrics, with track_redis_cache() called)
  // must outlive the cache.
  RedisReplayCache(boost::asio::io_context& io, RedisCacheOptions options,
                   std::shared_ptr<const crypto::Keyring> keyring, SharedCacheObserver& metrics);
  ~RedisReplayCache() override;
  RedisReplayCache(const RedisReplayCache&) = delete;
  RedisReplayCache& operator=(const RedisReplayCache&) = delete;

  void start();  // connects in the background; lookups fall back until the connection is ready
  void stop();   // for good: closes the connection, cancels the reconnect timer

  void lookup(std::string_view scope, std::string_view key, SharedLookupHandler handler) override;
  void put(std::string_view scope, std::string_view key, std::shared_ptr<const CachedRecord> record) override;

 private:
  struct Lookup;
  void finish(Lookup& lookup);
  SharedLookup open_value(const Lookup& lookup);
  void write(const std::string& scope, const std::string& key, const CachedRecord& record);
  // At most one warning a second per worker: a Redis full of bad values must not flood the log.
  bool warning_allowed();

  boost::asio::io_context& io_;
  RedisCacheOptions options_;
  RedisRecordCodec codec_;
  SharedCacheObserver& metrics_;
  std::shared_ptr<redis::RedisSession> session_;
  std::chrono::steady_clock::time_point last_warning_{};
  std::uint64_t warnings_suppressed_ = 0;
};

}  // namespace idem::cache
