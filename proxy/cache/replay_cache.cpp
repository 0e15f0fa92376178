#include "cache/replay_cache.hpp"

#include <functional>

namespace idem::cache {
namespace {
constexpr std::size_t kShards = 16;
// Bookkeeping per entry beyond its bytes (list node, map node, strings' headers): counted so a
// cache full of tiny responses still respects its budget.
constexpr std::size_t kEntryOverhead = 256;

std::string cache_id(std::string_view scope, std::string_view key) {
  std::string id;
  id.reserve(scope.size() + 1 + key.size());
  id.append(scope).push_back('\n');  // scopes never contain a newline
  id.append(key);
  return id;
}

std::size_t footprint(const std::string& id, const CachedRecord& record) {
  std::size_t bytes = kEntryOverhead + id.size() + record.fingerprint.size() + record.response.body.size() +
                      record.fingerprint_inputs.size();
  for (const auto& [name, value] : record.response.headers) bytes += name.size() + value.size() + 32;
  return bytes;
}
}  // namespace

ReplayCache::ReplayCache(std::size_t max_bytes)
    : max_bytes_(max_bytes), shard_budget_(max_bytes / kShards), shards_(kShards) {}

ReplayCache::Shard& ReplayCache::shard_for(const std::string& id) {
  return shards_[std::hash<std::string>{}(id) % shards_.size()];
}

void ReplayCache::erase(Shard& shard, std::list<Entry>::iterator entry) {
  shard.bytes -= entry->bytes;
  shard.index.erase(entry->id);
  shard.lru.erase(entry);
}

std::shared_ptr<const CachedRecord> ReplayCache::find(std::string_view scope, std::string_view key) {
  if (!enabled()) return nullptr;
  const std::string id = cache_id(scope, key);
  Shard& shard = shard_for(id);
  std::lock_guard lock(shard.mutex);
  const auto found = shard.index.find(id);
  if (found == shard.index.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  const auto entry = found->second;
  if (entry->record->expires_at <= std::chrono::steady_clock::now()) {
    erase(shard, entry);
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  shard.lru.splice(shard.lru.begin(), shard.lru, entry);
  hits_.fetch_add(1, std::memory_order_relaxed);
  return entry->record;
}

void ReplayCache::insert(std::string_view scope, std::string_view key, std::shared_ptr<const CachedRecord> record) {
  if (!enabled() || record->expires_at <= std::chrono::steady_clock::now()) return;
  std::string id = cache_id(scope, key);
  const std::size_t bytes = footprint(id, *record);
  if (bytes > shard_budget_) return;
  Shard& shard = shard_for(id);
  std::lock_guard lock(shard.mutex);
  if (const auto found = shard.index.find(id); found != shard.index.end()) erase(shard, found->second);
  while (!shard.lru.empty() && shard.bytes + bytes > shard_budget_) erase(shard, std::prev(shard.lru.end()));
  shard.lru.push_front(Entry{std::move(id), std::move(record), bytes});
  shard.index.emplace(shard.lru.front().id, shard.lru.begin());
  shard.bytes += bytes;
}

std::size_t ReplayCache::bytes() const {
  std::size_t total = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    total += shard.bytes;
  }
  return total;
}

}  // namespace idem::cache
