#pragma once
// Keys whose record this process is still settling in the background: a release or a completion
// the store has not confirmed yet, e.g. across a failover. This process
// knows the key's outcome (never ran, or its response) and the store does not yet. Until the write
// lands, a retry must not read the record the store still holds: once its lease lapsed it would
// read as an unknown outcome (502, locked) for a request that never ran, or whose response this
// process holds. A retry is answered 503 store-unavailable instead, and gets the true answer (run,
// or the replay) once the write is through. Process-wide (every worker's retries see it).
//
// Counted per key: two background writes on one key can overlap (a waiting duplicate's lost-poll
// release and the first request's pending completion), and the key stays held until the last of
// them finished, whichever ends first.
#include <cassert>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace idem::http {

class PendingSettlements {
 public:
  // Holds one key while it lives (a background write holds it for as long as it runs). Movable;
  // a default-constructed or moved-from guard holds nothing. It may be destroyed on any thread,
  // but not after the PendingSettlements it came from.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)), id_(std::move(other.id_)) {}
    Guard& operator=(Guard&& other) noexcept {
      if (this != &other) {
        reset();
        owner_ = std::exchange(other.owner_, nullptr);
        id_ = std::move(other.id_);
      }
      return *this;
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { reset(); }

    bool holds() const { return owner_ != nullptr; }
    void reset() {
      if (owner_ != nullptr) std::exchange(owner_, nullptr)->let_go(id_);
    }

   private:
    friend class PendingSettlements;
    Guard(PendingSettlements& owner, std::string id) : owner_(&owner), id_(std::move(id)) {}
    PendingSettlements* owner_ = nullptr;
    std::string id_;
  };

  [[nodiscard]] Guard hold(std::string_view scope, std::string_view key) {
    std::string held = id(scope, key);
    {
      std::lock_guard lock(mutex_);
      ++holders_[held];
    }
    return Guard(*this, std::move(held));
  }

  bool contains(std::string_view scope, std::string_view key) const {
    std::lock_guard lock(mutex_);
    return !holders_.empty() && holders_.contains(id(scope, key));
  }

 private:
  static std::string id(std::string_view scope, std::string_view key) {
    std::string joined;
    joined.reserve(scope.size() + 1 + key.size());
    joined.append(scope).append(1, '\n').append(key);
    return joined;
  }

  void let_go(const std::string& held) {
    std::lock_guard lock(mutex_);
    const auto found = holders_.find(held);
    assert(found != holders_.end() && found->second > 0);
    if (found != holders_.end() && --found->second == 0) holders_.erase(found);
  }

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::size_t> holders_;  // key id -> guards holding it
};

}  // namespace idem::http
