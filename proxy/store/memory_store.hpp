#pragma once
// Store kept in a process-local map, with the same semantics as the Postgres store (expiry, lease,
// owner checks, take-over of lapsed leases). For unit tests, the conformance suite and demos: it
// is not shared between processes and forgets everything on exit.
//
// Handlers run inline, before the call returns. Thread-safe (one mutex), though the Store
// contract only asks for use from one thread.
#include <map>
#include <mutex>
#include <utility>

#include "core/clock.hpp"
#include "store/store.hpp"

namespace idem::store {

class MemoryStore final : public Store {
 public:
  // `clock` must outlive the store; tests pass a clock they advance by hand.
  explicit MemoryStore(const core::Clock& clock);

  void claim(const ClaimRequest& request, ClaimHandler handler) override;
  void complete(const CompleteRequest& request, DoneHandler handler) override;
  void release(const ReleaseRequest& request, DoneHandler handler) override;

  std::size_t size() const;  // records held, expired ones included (nothing reaps them)

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Entry {
    std::string fingerprint;
    core::RecordState state = core::RecordState::in_flight;
    std::string owner;
    TimePoint lease_expires_at;  // meaningful while in_flight
    TimePoint expires_at;
    core::StoredResponse response;
  };
  using ScopedKey = std::pair<std::string, std::string>;  // (scope, key), as the table's primary key

  const core::Clock& clock_;
  mutable std::mutex mutex_;
  std::map<ScopedKey, Entry> records_;
};

}  // namespace idem::store
