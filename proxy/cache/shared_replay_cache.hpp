#pragma once
// A replay cache shared by every proxy process (Redis is the one implementation): the second place
// a replay looks, after the in-process ReplayCache and before the store's claim.
//
// Only a cache. A lookup never fails a request: it answers hit, miss, or fallback (the cache could
// not answer in time or at all), and on anything but a hit the caller asks the store. Only
// finished records (completed, too_large) are ever put in; they are immutable until they expire,
// and an entry never outlives its record.
//
// Threading: one instance per worker, used on that worker's io thread only. Lookup handlers run on
// that thread, always posted (never inside lookup()), exactly once, within the implementation's
// deadline. There is no cancellation: a caller that goes away keeps itself alive through the
// handler's captures. put() returns at once; its write completes (or not) in the background.
#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

#include "cache/replay_cache.hpp"

namespace idem::cache {

enum class SharedLookupOutcome {
  hit,       // `record` holds the finished record, not expired
  miss,      // the cache answered: nothing (or only an expired copy) for this key
  fallback,  // the cache could not answer; `reason` says why
};

enum class SharedFallbackReason {
  timeout,       // no answer within the deadline (a late answer is dropped)
  disconnected,  // no connection right now (reconnecting in the background)
  error,         // the cache answered with an error
  corrupt,       // the cached value does not decode, or does not open (encryption at rest)
};
std::string_view shared_fallback_reason_name(SharedFallbackReason reason);

struct SharedLookup {
  SharedLookupOutcome outcome = SharedLookupOutcome::miss;
  SharedFallbackReason reason = SharedFallbackReason::error;  // for fallback only
  // For hit only. Its expires_at is on this process's steady clock and never later than the
  // record's expiry, so it may go straight into the in-process cache.
  std::shared_ptr<const CachedRecord> record;
};

using SharedLookupHandler = std::function<void(SharedLookup)>;

class SharedReplayCache {
 public:
  virtual ~SharedReplayCache() = default;

  // The finished record of (scope, key), if the cache holds one.
  virtual void lookup(std::string_view scope, std::string_view key, SharedLookupHandler handler) = 0;
  // Offers a finished record (completed or too_large) for other processes to replay, valid until
  // record->expires_at. Fire and forget: returns at once, the encoding and the write happen after
  // the caller's next suspension (its response is on its way first); skipped when the cache is
  // not reachable, the remaining lifetime is too short to be worth it, or the record too large.
  virtual void put(std::string_view scope, std::string_view key, std::shared_ptr<const CachedRecord> record) = 0;
};

// What a shared cache reports as it works, for the process's metrics (ProxyMetrics implements it).
// Called from the worker threads; implementations count atomically.
class SharedCacheObserver {
 public:
  virtual ~SharedCacheObserver() = default;
  // Every lookup is exactly one of hit, miss, or fallback (by reason).
  virtual void redis_lookup(SharedLookupOutcome outcome, SharedFallbackReason reason) = 0;
  virtual void redis_write(bool acknowledged) = 0;  // a SET Redis answered OK, or one that failed
  virtual void redis_connection_up(bool up) = 0;    // a worker's connection became ready, or stopped being
};

}  // namespace idem::cache
