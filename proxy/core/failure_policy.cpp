#include "core/failure_policy.hpp"

#include <cassert>

namespace idem::core {

std::string_view claim_failure_answer_name(ClaimFailureAnswer answer) {
  switch (answer) {
    case ClaimFailureAnswer::forward_unchecked: return "forward_unchecked";
    case ClaimFailureAnswer::unavailable: return "unavailable";
    case ClaimFailureAnswer::corrupt: return "corrupt";
  }
  return "invalid";
}

ClaimFailure after_claim_failure(StoreError error, const RoutePolicy& policy) {
  switch (error) {
    case StoreError::unavailable:
      // No connection to the store could be made: nothing was recorded, and nothing can be.
      // fail_open is for exactly this.
      return {policy.store_unavailable == StoreUnavailable::fail_open ? ClaimFailureAnswer::forward_unchecked
                                                                      : ClaimFailureAnswer::unavailable,
              false};
    case StoreError::busy:
      // Nothing was recorded, but the store is there, saturated or refusing writes: forwarding
      // unprotected now would let a retry storm's duplicates execute exactly when the store is
      // busiest, or every request of a failover's read-only window run unchecked.
      return {ClaimFailureAnswer::unavailable, false};
    case StoreError::reply_lost:
      // The claim may stand. Forwarding now would run the request unprotected while a record says
      // it is in flight, so fail_open does not apply: answer 503 and free the key behind us.
    case StoreError::internal:
      // Or the store answered something we cannot read (it may even have been our own fresh
      // claim): never forward on a store we do not understand, and free whatever we may own.
      return {ClaimFailureAnswer::unavailable, true};
    case StoreError::corrupt: return {ClaimFailureAnswer::corrupt, false};
    case StoreError::ok:
    case StoreError::not_owner:
    case StoreError::not_found:
    case StoreError::lease_running: break;  // not a claim failure
  }
  assert(false && "after_claim_failure: not a claim failure");
  return {ClaimFailureAnswer::unavailable, true};
}

std::string_view record_fate_name(RecordFate fate) {
  switch (fate) {
    case RecordFate::release: return "release";
    case RecordFate::complete_too_large: return "complete_too_large";
    case RecordFate::mark_unknown: return "mark_unknown";
    case RecordFate::leave_in_flight: return "leave_in_flight";
  }
  return "invalid";
}

RecordFate after_upstream_failure(UpstreamFailureKind kind, const RoutePolicy& policy) {
  switch (kind) {
    case UpstreamFailureKind::nothing_sent: return RecordFate::release;
    case UpstreamFailureKind::response_too_large: return RecordFate::complete_too_large;
    case UpstreamFailureKind::outcome_unknown:
      switch (policy.unknown_outcome) {
        case UnknownOutcome::lock: return RecordFate::mark_unknown;
        case UnknownOutcome::retry: return RecordFate::leave_in_flight;
      }
      break;
  }
  assert(false && "after_upstream_failure: invalid kind or policy");
  return RecordFate::mark_unknown;  // never re-execute
}

std::string_view owner_write_name(OwnerWrite write) {
  switch (write) {
    case OwnerWrite::complete: return "complete";
    case OwnerWrite::release: return "release";
    case OwnerWrite::mark_unknown: return "mark_unknown";
  }
  return "invalid";
}

OwnerWriteNext after_owner_write(OwnerWrite write, StoreError error) {
  switch (error) {
    case StoreError::ok: return OwnerWriteNext::done;
    case StoreError::unavailable:
    case StoreError::busy:
    case StoreError::reply_lost: return OwnerWriteNext::retry;
    case StoreError::not_owner:
      // A release wants our record gone: if it is not ours (any more), there is nothing to free.
      // complete and mark_unknown are idempotent for their owner, so not_owner means another
      // request owns the key now, or an operator released it, or it expired.
      return write == OwnerWrite::release ? OwnerWriteNext::done : OwnerWriteNext::give_up;
    case StoreError::not_found:
    case StoreError::lease_running:
    case StoreError::internal:
    case StoreError::corrupt: return OwnerWriteNext::give_up;
  }
  assert(false && "after_owner_write: invalid error");
  return OwnerWriteNext::give_up;
}

std::chrono::milliseconds owner_write_horizon(const RoutePolicy& policy) { return policy.ttl; }

}  // namespace idem::core
