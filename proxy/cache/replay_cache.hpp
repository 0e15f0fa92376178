#pragma once
// In-process cache of finished records, so a replay answers with no network call at all.
// Sound because a finished record (completed or too_large) is immutable until it expires, and an
// entry never outlives the record's expiry. Shared by every worker; sharded locks keep the
// critical sections to a hash lookup and a list splice. Bounded in bytes (LRU eviction).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/record.hpp"

namespace idem::cache {

struct CachedRecord {
  std::string fingerprint;
  core::RecordState state = core::RecordState::completed;  // completed or too_large
  core::StoredResponse response;
  std::chrono::steady_clock::time_point expires_at;
  // The first request's fingerprint inputs (fingerprint::fingerprint_inputs), on this process's own
  // completions when small: a retry with these exact inputs has `fingerprint`. Empty otherwise.
  std::string fingerprint_inputs;
};

class ReplayCache {
 public:
  explicit ReplayCache(std::size_t max_bytes);

  // nullptr on a miss or when the entry has expired (it is dropped then).
  std::shared_ptr<const CachedRecord> find(std::string_view scope, std::string_view key);
  // Only finished records belong here; an entry larger than a shard's share is not cached.
  void insert(std::string_view scope, std::string_view key, std::shared_ptr<const CachedRecord> record);

  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  std::size_t bytes() const;
  bool enabled() const { return max_bytes_ > 0; }

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const CachedRecord> record;
    std::size_t bytes;
  };
  struct Shard {
    mutable std::mutex mutex;
    std::list<Entry> lru;                                                    // most recently used first
    std::unordered_map<std::string_view, std::list<Entry>::iterator> index;  // views into Entry::id
    std::size_t bytes = 0;
  };
  Shard& shard_for(const std::string& id);
  static void erase(Shard& shard, std::list<Entry>::iterator entry);

  std::size_t max_bytes_;
  std::size_t shard_budget_;
  std::vector<Shard> shards_;
  std::atomic<std::uint64_t> hits_{0};
  std::atomic<std::uint64_t> misses_{0};
};

}  // namespace idem::cache
