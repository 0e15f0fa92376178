#pragma once
// The idempotency record store: atomic primitives only. HTTP semantics (what a record means for
// a request) live above it, in core/decision.hpp.
//
// Threading: a Store instance belongs to one io thread (each worker has its own). Every method is
// called on that thread, and its handler runs on that thread, exactly once, possibly inline
// (the memory store answers at once). Callers must not rely on the handler running later.
// There is no cancellation: a handler always runs, after the operation's deadline at the latest;
// a caller whose session has gone keeps itself alive through the handler's captures.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/decision.hpp"
#include "core/record.hpp"
#include "core/store_error.hpp"

namespace idem::store {

// The errors every operation reports (core/store_error.hpp says what each means).
using core::store_error_name;
using core::StoreError;

struct ClaimRequest {
  std::string scope;
  std::string key;
  std::string fingerprint;
  std::string owner;                   // random token identifying this claim; required by complete/release
  std::chrono::milliseconds ttl{0};    // record lifetime from the claim
  std::chrono::milliseconds lease{0};  // in-flight lease from the claim
  // unknown_outcome=retry: an in-flight record whose lease lapsed is taken over (claimed anew).
  bool take_over_lapsed_lease = false;
  // unknown_outcome=lock: how much longer than `ttl` the in-flight record is kept. It matters only
  // when no owner write ever settles it (the proxy died mid-exchange): its request may have run,
  // so it lasts as long as an `unknown` record would, and no claim replaces it at its ttl. complete
  // and mark_unknown set the expiry from the claim's time again.
  std::chrono::milliseconds unsettled_retention{0};
  // The scope the same request had before its route's scope changed form (the authority joined
  // it): a live record there is answered as the existing record and nothing is claimed, so
  // records made before the upgrade keep matching during their ttl. Empty: none.
  std::string legacy_scope{};
  // The same request's fingerprint in the scheme before `fingerprint`'s (a "v1:" one), or empty.
  // Set only after a claim returned a record carrying it: with take_over_lapsed_lease, an in-flight
  // record of this request made before the upgrade is taken over like one carrying `fingerprint`
  // (and claimed anew with `fingerprint`).
  std::string legacy_fingerprint{};
};

struct CompleteRequest {
  std::string scope;
  std::string key;
  std::string owner;
  core::RecordState state = core::RecordState::completed;  // completed or too_large
  core::StoredResponse response;                           // status always; headers and body only for completed
  std::chrono::milliseconds ttl{
      0};  // the finished record expires ttl after its claim (or sooner, if the claim said so)
};

struct ReleaseRequest {
  std::string scope;
  std::string key;
  std::string owner;
  // mark_unknown: the unknown record expires ttl + unknown_retention after its claim.
  // release: a fence it leaves lasts ttl + unknown_retention (fence_lifetime).
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds unknown_retention{0};
};

// A fence outlives any in-flight record its owner's claim could make: ttl + unknown_retention
// after the claim runs. A claim whose commit waits (a synchronous standby) ran before its release;
// a claim queued in a pooler runs after it, so the fence also lasts at least an hour, far past any
// pooler's queue (PgBouncer's query_wait_timeout is 120 s by default). A claim that runs even later
// is not covered (the model check draws queue delays within the fence's life).
inline constexpr std::chrono::milliseconds kMinFenceLifetime = std::chrono::hours(1);
inline std::chrono::milliseconds fence_lifetime(const ReleaseRequest& request) {
  return std::max(request.ttl + request.unknown_retention, kMinFenceLifetime);
}

// (scope, key) as an operator names a record.
struct RecordKey {
  std::string scope;
  std::string key;
};

// A record as an operator sees it: everything but the stored headers and body.
struct RecordInfo {
  std::string fingerprint;
  core::RecordState state = core::RecordState::in_flight;
  std::int64_t created_at_ms = 0;        // Unix epoch milliseconds (database clock)
  std::int64_t lease_expires_at_ms = 0;  // 0 once completed
  std::int64_t completed_at_ms = 0;      // 0 while in flight
  std::int64_t expires_at_ms = 0;
  int response_status = 0;  // 0 while in flight / unknown
  std::size_t body_bytes = 0;
};

using ClaimHandler = std::function<void(StoreError, core::ClaimResult)>;
using DoneHandler = std::function<void(StoreError)>;
using SweepHandler = std::function<void(StoreError, std::size_t deleted)>;
using InspectHandler = std::function<void(StoreError, RecordInfo)>;
// force_release's answer; `lease_remaining` is meaningful with lease_running (how long until a
// release can succeed).
using ForceReleaseHandler = std::function<void(StoreError, std::chrono::milliseconds lease_remaining)>;

class Store {
 public:
  virtual ~Store() = default;
  // One round trip: inserts an in-flight record owned by `owner`, or returns the live record.
  // Records past their expiry count as absent (and are replaced), except an in-flight record
  // whose lease still runs: its request may be executing, whatever its ttl says. An in-flight
  // record of a fenced owner (release) counts as absent, lease or not. A claim by a fenced owner
  // inserts nothing: it returns the live record, if any, else fails (internal).
  virtual void claim(const ClaimRequest& request, ClaimHandler handler) = 0;
  // In-flight record owned by `owner` -> completed/too_large with the response. not_owner otherwise.
  // Idempotent for its owner: run again after reply_lost, it finds its own completion and is ok.
  virtual void complete(const CompleteRequest& request, DoneHandler handler) = 0;
  // Deletes the in-flight record owned by `owner`. When there is none (not_owner: not ours any
  // more, or the claim's reply was lost and the claim has not committed, perhaps never will), it
  // fences `owner` instead: the claim `owner` made never holds the key, even if it commits after
  // this (a commit waiting for a synchronous standby): a claim by `owner` inserts nothing, and any
  // other claim takes over an in-flight record of a fenced owner as if it were absent. So after
  // this returns ok or not_owner, the key is free of `owner` for good.
  virtual void release(const ReleaseRequest& request, DoneHandler handler) = 0;
  // The request reached the upstream and no answer came back: the in-flight record owned by
  // `owner` becomes `unknown` (terminal: never re-executed, until an operator releases it), and
  // expires ttl + unknown_retention after its claim. Idempotent for its owner, like complete.
  virtual void mark_unknown(const ReleaseRequest& request, DoneHandler handler) = 0;
  // Operator action: deletes the record if it is `unknown`, or `in_flight` with its lease lapsed,
  // whoever owns it, so the next retry executes. An in-flight record within its lease is refused
  // (lease_running, with the time left): its request may be executing, and a release would let a
  // retry run it twice. Completed records are never released (not_found).
  virtual void force_release(const RecordKey& key, ForceReleaseHandler handler) = 0;
  // Deletes at most `batch` records past their expiry (oldest first; uses the expiry index; safe
  // to run from several processes at once: rows locked by another sweeper are skipped), and at
  // most `batch` expired fences (not counted in `deleted`).
  virtual void sweep_expired(std::size_t batch, SweepHandler handler) = 0;
  // Operator view of a live record; not_found when absent or expired.
  virtual void inspect(const RecordKey& key, InspectHandler handler) = 0;
};

}  // namespace idem::store
