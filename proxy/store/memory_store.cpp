#include "store/memory_store.hpp"

#include <algorithm>
#include <vector>

namespace idem::store {
namespace {

std::chrono::milliseconds until(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from);
}

}  // namespace

MemoryStore::MemoryStore(const core::Clock& clock)
    : clock_(clock), clock_at_construction_(clock.now()), epoch_at_construction_(std::chrono::system_clock::now()) {}

bool MemoryStore::is_live(const Entry& entry, TimePoint now) {
  return entry.expires_at > now || (entry.state == core::RecordState::in_flight && entry.lease_expires_at > now);
}

core::Record MemoryStore::existing_record(const Entry& entry, TimePoint now) {
  core::Record record;
  record.fingerprint = entry.fingerprint;
  record.state = entry.state;
  record.response = entry.response;
  if (entry.state == core::RecordState::in_flight) record.lease_remaining = until(now, entry.lease_expires_at);
  record.expires_in = until(now, entry.expires_at);
  return record;
}

void MemoryStore::claim(const ClaimRequest& request, ClaimHandler handler) {
  core::ClaimResult result;
  StoreError error = StoreError::ok;
  {
    const std::lock_guard lock(mutex_);
    std::optional<Entry> write;
    error = decide_claim(request, result, write);
    if (write) records_.insert_or_assign(ScopedKey{request.scope, request.key}, std::move(*write));
  }
  handler(error, std::move(result));  // outside the lock: the handler may call us again
}

std::function<void()> MemoryStore::claim_visible_later(const ClaimRequest& request, ClaimHandler handler) {
  core::ClaimResult result;
  StoreError error = StoreError::ok;
  std::optional<Entry> write;
  {
    const std::lock_guard lock(mutex_);
    error = decide_claim(request, result, write);
  }
  handler(error, std::move(result));
  if (!write) return {};
  return [this, key = ScopedKey{request.scope, request.key}, entry = std::move(*write)] {
    const std::lock_guard lock(mutex_);
    records_.insert_or_assign(key, entry);
  };
}

bool MemoryStore::fenced(const std::string& scope, const std::string& key, const std::string& owner) const {
  return !fences_.empty() && fences_.contains(FencedOwner{scope, key, owner});
}

StoreError MemoryStore::decide_claim(const ClaimRequest& request, core::ClaimResult& result,
                                     std::optional<Entry>& write) const {
  const TimePoint now = clock_.now();
  // A live record under the legacy scope is the answer, as in the Postgres claim; never taken over.
  if (!request.legacy_scope.empty()) {
    const auto legacy = records_.find(ScopedKey{request.legacy_scope, request.key});
    if (legacy != records_.end() && is_live(legacy->second, now)) {
      result.existing = existing_record(legacy->second, now);
      result.existing_under_legacy_scope = true;
      return StoreError::ok;
    }
  }
  // A claim whose owner was fenced ran after its proxy gave up on it: it takes nothing. As in the
  // Postgres claim, it answers the live record, or fails when there is none.
  if (fenced(request.scope, request.key, request.owner)) {
    const auto it = records_.find(ScopedKey{request.scope, request.key});
    if (it == records_.end() || !is_live(it->second, now)) return StoreError::internal;
    result.existing = existing_record(it->second, now);
    return StoreError::ok;
  }
  const auto it = records_.find(ScopedKey{request.scope, request.key});
  // Same rule as the Postgres claim: an expired record counts as absent; a lapsed lease is taken
  // over only when asked, and only by the same request (else the caller must see the mismatch).
  // An `unknown` record is never taken over: it waits for an operator or its expiry. An in-flight
  // record of a fenced owner counts as absent: its request never went upstream.
  if (it != records_.end()) {
    const Entry& entry = it->second;
    const bool in_flight = entry.state == core::RecordState::in_flight;
    const bool lease_running = in_flight && entry.lease_expires_at > now;
    const bool replace = (entry.expires_at <= now && !lease_running) ||
                         (request.take_over_lapsed_lease && in_flight && entry.lease_expires_at <= now &&
                          (entry.fingerprint == request.fingerprint ||
                           (!request.legacy_fingerprint.empty() && entry.fingerprint == request.legacy_fingerprint))) ||
                         (in_flight && fenced(request.scope, request.key, entry.owner));
    if (!replace) {
      result.existing = existing_record(entry, now);
      return StoreError::ok;
    }
  }
  write = Entry{.fingerprint = request.fingerprint,
                .state = core::RecordState::in_flight,
                .owner = request.owner,
                .created_at = now,
                .lease_expires_at = now + request.lease,
                .completed_at = {},
                .expires_at = now + request.ttl + request.unsettled_retention,
                .response = {}};
  result.claimed = true;
  result.existing.expires_in = request.ttl;
  return StoreError::ok;
}

std::map<MemoryStore::ScopedKey, MemoryStore::Entry>::iterator MemoryStore::find_owned(const std::string& scope,
                                                                                       const std::string& key,
                                                                                       const std::string& owner,
                                                                                       core::RecordState or_state) {
  const auto it = records_.find(ScopedKey{scope, key});
  if (it == records_.end() || it->second.owner != owner) return records_.end();
  const core::RecordState state = it->second.state;
  return state == core::RecordState::in_flight || state == or_state ? it : records_.end();
}

void MemoryStore::complete(const CompleteRequest& request, DoneHandler handler) {
  // Caller bugs: completing into in_flight, or a record that would expire the moment it completes.
  if (request.state == core::RecordState::in_flight || request.ttl <= std::chrono::milliseconds::zero()) {
    handler(StoreError::internal);
    return;
  }
  StoreError error = StoreError::not_owner;
  {
    const std::lock_guard lock(mutex_);
    // Our own completion again (its first reply was lost) finds the record in its final state.
    const auto it = find_owned(request.scope, request.key, request.owner, request.state);
    if (it != records_.end()) {
      Entry& entry = it->second;
      if (entry.state == core::RecordState::in_flight) entry.completed_at = clock_.now();
      entry.state = request.state;
      entry.response.status = request.response.status;
      if (request.state == core::RecordState::completed) {
        entry.response.headers = request.response.headers;
        entry.response.body = request.response.body;
      }
      // A key lives `ttl` from its claim (never longer than the claim said).
      entry.expires_at = std::min(entry.expires_at, entry.created_at + request.ttl);
      error = StoreError::ok;
    }
  }
  handler(error);
}

void MemoryStore::release(const ReleaseRequest& request, DoneHandler handler) {
  StoreError error = StoreError::not_owner;
  {
    const std::lock_guard lock(mutex_);
    const auto it = find_owned(request.scope, request.key, request.owner, core::RecordState::in_flight);
    if (it != records_.end()) {
      records_.erase(it);
      error = StoreError::ok;
    } else {
      // Nothing to delete: fence the owner, as the Postgres release does (its claim may yet land).
      fences_.try_emplace(FencedOwner{request.scope, request.key, request.owner},
                          clock_.now() + fence_lifetime(request));
    }
  }
  handler(error);
}

void MemoryStore::mark_unknown(const ReleaseRequest& request, DoneHandler handler) {
  if (request.ttl <= std::chrono::milliseconds::zero()) {  // a caller bug: it would expire at once
    handler(StoreError::internal);
    return;
  }
  StoreError error = StoreError::not_owner;
  {
    const std::lock_guard lock(mutex_);
    const auto it = find_owned(request.scope, request.key, request.owner, core::RecordState::unknown);
    if (it != records_.end()) {
      it->second.expires_at =
          std::max(it->second.expires_at, it->second.created_at + request.ttl + request.unknown_retention);
      it->second.state = core::RecordState::unknown;  // the lease no longer means anything
      error = StoreError::ok;
    }
  }
  handler(error);
}

void MemoryStore::force_release(const RecordKey& key, ForceReleaseHandler handler) {
  StoreError error = StoreError::not_found;
  std::chrono::milliseconds lease_remaining{0};
  {
    const std::lock_guard lock(mutex_);
    const TimePoint now = clock_.now();
    const auto it = records_.find(ScopedKey{key.scope, key.key});
    if (it != records_.end() && it->second.expires_at > now &&
        (it->second.state == core::RecordState::in_flight || it->second.state == core::RecordState::unknown)) {
      if (it->second.state == core::RecordState::in_flight && it->second.lease_expires_at > now) {
        error = StoreError::lease_running;
        lease_remaining = until(now, it->second.lease_expires_at);
      } else {
        records_.erase(it);
        error = StoreError::ok;
      }
    }
  }
  handler(error, lease_remaining);
}

void MemoryStore::sweep_expired(std::size_t batch, SweepHandler handler) {
  std::size_t deleted = 0;
  {
    const std::lock_guard lock(mutex_);
    const TimePoint now = clock_.now();
    std::vector<std::map<ScopedKey, Entry>::iterator> expired;
    for (auto it = records_.begin(); it != records_.end(); ++it) {
      if (it->second.expires_at <= now) expired.push_back(it);
    }
    // Oldest first, as the Postgres sweep walks its expiry index.
    const std::size_t count = std::min(batch, expired.size());
    std::partial_sort(expired.begin(), expired.begin() + static_cast<std::ptrdiff_t>(count), expired.end(),
                      [](const auto& a, const auto& b) { return a->second.expires_at < b->second.expires_at; });
    for (std::size_t i = 0; i < count; ++i) records_.erase(expired[i]);
    deleted = count;
    // Expired fences too, at most `batch` (uncounted, as in the Postgres sweep).
    std::size_t fences_left = batch;
    for (auto fence = fences_.begin(); fence != fences_.end() && fences_left > 0;) {
      if (fence->second <= now) {
        fence = fences_.erase(fence);
        --fences_left;
      } else {
        ++fence;
      }
    }
  }
  handler(StoreError::ok, deleted);
}

void MemoryStore::inspect(const RecordKey& key, InspectHandler handler) {
  StoreError error = StoreError::not_found;
  RecordInfo info;
  {
    const std::lock_guard lock(mutex_);
    const auto it = records_.find(ScopedKey{key.scope, key.key});
    if (it != records_.end() && it->second.expires_at > clock_.now()) {
      const Entry& entry = it->second;
      info.fingerprint = entry.fingerprint;
      info.state = entry.state;
      info.created_at_ms = epoch_ms(entry.created_at);
      info.expires_at_ms = epoch_ms(entry.expires_at);
      // Which times and response fields mean something depends on the state, as in the table.
      switch (entry.state) {
        case core::RecordState::in_flight: info.lease_expires_at_ms = epoch_ms(entry.lease_expires_at); break;
        case core::RecordState::completed:
        case core::RecordState::too_large:
          info.completed_at_ms = epoch_ms(entry.completed_at);
          info.response_status = entry.response.status;
          info.body_bytes = entry.response.body.size();
          break;
        case core::RecordState::unknown: break;
      }
      error = StoreError::ok;
    }
  }
  handler(error, std::move(info));
}

std::int64_t MemoryStore::epoch_ms(TimePoint time) const {
  const auto since_epoch = epoch_at_construction_.time_since_epoch() + (time - clock_at_construction_);
  return std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count();
}

std::size_t MemoryStore::size() const {
  const std::lock_guard lock(mutex_);
  return records_.size();
}

bool MemoryStore::contains(const RecordKey& key) const {
  const std::lock_guard lock(mutex_);
  return records_.contains(ScopedKey{key.scope, key.key});
}

}  // namespace idem::store
