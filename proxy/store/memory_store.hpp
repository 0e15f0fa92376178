#pragma once
// Store kept in a process-local map, with the same semantics as the Postgres store (expiry, lease,
// owner checks, take-over of lapsed leases, `unknown` records, the operator's force_release and
// inspect, batched sweeps). For unit tests, the conformance suite and demos: it is not shared
// between processes and forgets everything on exit.
//
// Handlers run inline, before the call returns. Thread-safe (one mutex), though the Store
// contract only asks for use from one thread.
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "core/clock.hpp"
#include "store/store.hpp"

namespace idem::store {

class MemoryStore final : public Store {
 public:
  // `clock` must outlive the store; tests pass a clock they advance by hand. inspect() reports
  // times on the Unix epoch: the clock's readings shifted by the offset seen at construction.
  explicit MemoryStore(const core::Clock& clock);

  void claim(const ClaimRequest& request, ClaimHandler handler) override;
  void complete(const CompleteRequest& request, DoneHandler handler) override;
  void release(const ReleaseRequest& request, DoneHandler handler) override;
  void mark_unknown(const ReleaseRequest& request, DoneHandler handler) override;
  void force_release(const RecordKey& key, ForceReleaseHandler handler) override;
  // Scans every record (O(n log n)): fine for the sizes this store is meant for.
  void sweep_expired(std::size_t batch, SweepHandler handler) override;
  void inspect(const RecordKey& key, InspectHandler handler) override;

  // For tests: what is held, expired records included until a sweep deletes them.
  std::size_t size() const;
  bool contains(const RecordKey& key) const;

  // For the timing model (tests/unit/timing): a claim whose commit lands after its statement ran,
  // as when Postgres's commit waits for a synchronous standby. The statement's decision is taken
  // now, against what is visible now (lease and expiry counted from now, a fence written later
  // unseen), and `handler` gets it as from claim(). The record it writes appears only when the
  // returned function is called, in place of whatever the key holds then; empty when the claim
  // writes nothing. Until then the caller holds back what Postgres would make wait on the row (the
  // key's other claims, the writes of the record it replaces).
  std::function<void()> claim_visible_later(const ClaimRequest& request, ClaimHandler handler);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Entry {
    std::string fingerprint;
    core::RecordState state = core::RecordState::in_flight;
    std::string owner;
    TimePoint created_at;
    TimePoint lease_expires_at;  // meaningful while in_flight
    TimePoint completed_at;      // meaningful once completed or too_large
    TimePoint expires_at;
    core::StoredResponse response;
  };
  using ScopedKey = std::pair<std::string, std::string>;                  // (scope, key), as the table's primary key
  using FencedOwner = std::tuple<std::string, std::string, std::string>;  // (scope, key, owner)

  // The record (scope, key) when `owner` holds it in flight or in `or_state` (the state the
  // operation leaves, so that running it again is a success), else records_.end().
  std::map<ScopedKey, Entry>::iterator find_owned(const std::string& scope, const std::string& key,
                                                  const std::string& owner, core::RecordState or_state);
  std::int64_t epoch_ms(TimePoint time) const;
  // The claim's decision, with mutex_ held: fills `result` and `write` (the record the claim puts
  // in place, if any) without changing anything.
  StoreError decide_claim(const ClaimRequest& request, core::ClaimResult& result, std::optional<Entry>& write) const;
  bool fenced(const std::string& scope, const std::string& key, const std::string& owner) const;
  // Not expired, or in flight with its lease running (what a claim answers as existing).
  static bool is_live(const Entry& entry, TimePoint now);
  static core::Record existing_record(const Entry& entry, TimePoint now);

  const core::Clock& clock_;
  const TimePoint clock_at_construction_;
  const std::chrono::system_clock::time_point epoch_at_construction_;
  mutable std::mutex mutex_;
  std::map<ScopedKey, Entry> records_;
  std::map<FencedOwner, TimePoint> fences_;  // owners whose claim was given up on, with their expiry
};

}  // namespace idem::store
