#pragma once
// Keys whose record this process is still settling in the background: a release or a completion
// the store has not confirmed yet, e.g. across a failover. This process
// knows the key's outcome (never ran, or its response) and the store does not yet. Until the write
// lands, a retry must not read the record the store still holds: once its lease lapsed it would
// read as an unknown outcome (502, locked) for a request that never ran, or whose response this
// process holds. A retry is answered 503 store-unavailable instead, and gets the true answer (run,
// or the replay) once the write is through. Process-wide (every worker's retries see it).
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace idem::http {

class PendingSettlements {
 public:
  void add(std::string_view scope, std::string_view key) {
    std::lock_guard lock(mutex_);
    keys_.insert(id(scope, key));
  }
  void remove(std::string_view scope, std::string_view key) {
    std::lock_guard lock(mutex_);
    keys_.erase(id(scope, key));
  }
  bool contains(std::string_view scope, std::string_view key) const {
    std::lock_guard lock(mutex_);
    return !keys_.empty() && keys_.contains(id(scope, key));
  }

 private:
  static std::string id(std::string_view scope, std::string_view key) {
    std::string joined;
    joined.reserve(scope.size() + 1 + key.size());
    joined.append(scope).append(1, '\n').append(key);
    return joined;
  }

  mutable std::mutex mutex_;
  std::unordered_set<std::string> keys_;
};

}  // namespace idem::http
