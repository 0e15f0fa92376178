#include "store/memory_store.hpp"

namespace idem::store {

MemoryStore::MemoryStore(const core::Clock& clock) : clock_(clock) {}

void MemoryStore::claim(const ClaimRequest& request, ClaimHandler handler) {
  core::ClaimResult result;
  {
    const std::lock_guard lock(mutex_);
    const TimePoint now = clock_.now();
    auto [it, inserted] = records_.try_emplace(ScopedKey{request.scope, request.key});
    Entry& entry = it->second;
    // Same rule as the Postgres claim: an expired record counts as absent; a lapsed lease is taken
    // over only when asked, and only by the same request (else the caller must see the mismatch).
    const bool replace = inserted || entry.expires_at <= now ||
                         (request.take_over_lapsed_lease && entry.state == core::RecordState::in_flight &&
                          entry.lease_expires_at <= now && entry.fingerprint == request.fingerprint);
    if (replace) {
      entry = Entry{.fingerprint = request.fingerprint,
                    .state = core::RecordState::in_flight,
                    .owner = request.owner,
                    .lease_expires_at = now + request.lease,
                    .expires_at = now + request.ttl,
                    .response = {}};
      result.claimed = true;
    } else {
      result.existing.fingerprint = entry.fingerprint;
      result.existing.state = entry.state;
      result.existing.response = entry.response;
      if (entry.state == core::RecordState::in_flight) {
        result.existing.lease_remaining =
            std::chrono::duration_cast<std::chrono::milliseconds>(entry.lease_expires_at - now);
      }
    }
  }
  handler(StoreError::ok, std::move(result));  // outside the lock: the handler may call us again
}

void MemoryStore::complete(const CompleteRequest& request, DoneHandler handler) {
  if (request.state == core::RecordState::in_flight) {
    handler(StoreError::internal);  // completing into in_flight is a caller bug
    return;
  }
  StoreError error = StoreError::not_owner;
  {
    const std::lock_guard lock(mutex_);
    const auto it = records_.find(ScopedKey{request.scope, request.key});
    if (it != records_.end() && it->second.owner == request.owner &&
        it->second.state == core::RecordState::in_flight) {
      Entry& entry = it->second;
      entry.state = request.state;
      entry.response.status = request.response.status;
      if (request.state == core::RecordState::completed) {
        entry.response.headers = request.response.headers;
        entry.response.body = request.response.body;
      }
      // expires_at stays: a key lives `ttl` from its first claim.
      error = StoreError::ok;
    }
  }
  handler(error);
}

void MemoryStore::release(const ReleaseRequest& request, DoneHandler handler) {
  StoreError error = StoreError::not_owner;
  {
    const std::lock_guard lock(mutex_);
    const auto it = records_.find(ScopedKey{request.scope, request.key});
    if (it != records_.end() && it->second.owner == request.owner &&
        it->second.state == core::RecordState::in_flight) {
      records_.erase(it);
      error = StoreError::ok;
    }
  }
  handler(error);
}

std::size_t MemoryStore::size() const {
  const std::lock_guard lock(mutex_);
  return records_.size();
}

}  // namespace idem::store
