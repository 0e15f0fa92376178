#pragma once
// Keys whose record this process is deleting in the background (a fenced release the store has not
// confirmed yet: after a lost claim reply, or after an upstream that never saw the request). Their
// request never ran. Until the release lands, a retry must not read the record the store still
// holds: once its lease lapses it would read as an unknown outcome (502, locked) for a request
// that never reached the upstream. A retry is answered 503 store-unavailable instead, and runs
// normally once the release is through. Process-wide (every worker's retries see it).
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace idem::http {

class PendingReleases {
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
