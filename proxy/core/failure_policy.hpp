#pragma once
// What the exchange does when something it depends on fails: the store on the claim, the upstream,
// and the store again on the writes that settle the claimed record. Pure decisions, beside
// decide() (decision.hpp); the exchange only carries them out.
//
// The rule behind all of them: an error after a statement went out (reply_lost) is not "nothing
// happened". The claim may have recorded an in-flight record that nobody will ever execute, and a
// completion may have committed. Every owner write is fenced by the claim's owner token and is
// idempotent for that owner, so the answer to an uncertain write is always to run it again.
#include <chrono>
#include <string_view>

#include "core/route.hpp"
#include "core/store_error.hpp"
#include "core/upstream_failure.hpp"

namespace idem::core {

// ---- The claim failed -------------------------------------------------------------------------

enum class ClaimFailureAnswer {
  forward_unchecked,  // fail_open and no store connection could be made: forward, unprotected
  unavailable,        // 503 + Retry-After: nothing was forwarded; a retry is safe
  corrupt,            // 500: the stored record failed its integrity check; never replayed or re-run
};
std::string_view claim_failure_answer_name(ClaimFailureAnswer answer);

struct ClaimFailure {
  ClaimFailureAnswer answer = ClaimFailureAnswer::unavailable;
  // The claim may have created an in-flight record owned by this request, which will never run:
  // delete it by owner token in the background (fenced release) until the store answers, so the
  // key is free for the client's retry instead of locked until its lease lapses.
  bool release_claim = false;
};

// After a claim (or a waiting duplicate's poll, which is a claim too) returned `error` != ok.
ClaimFailure after_claim_failure(StoreError error, const RoutePolicy& policy);

// ---- The upstream failed ----------------------------------------------------------------------

enum class RecordFate {
  release,             // delete the claim: the request did not run, the client may retry
  complete_too_large,  // the request ran: keep its status; retries get 409, never a re-run
  mark_unknown,        // the request may have run: terminal `unknown`, retries get 502
  leave_in_flight,     // unknown_outcome: retry: the lease lapses and a retry takes the key over
};
std::string_view record_fate_name(RecordFate fate);

RecordFate after_upstream_failure(UpstreamFailureKind kind, const RoutePolicy& policy);

// ---- A write that settles the claimed record failed -------------------------------------------

enum class OwnerWrite { complete, release, mark_unknown };
std::string_view owner_write_name(OwnerWrite write);

enum class OwnerWriteNext {
  done,     // the record is as the write wanted it (or there is nothing left to settle)
  retry,    // not known to have happened: run it again later, with backoff
  give_up,  // it cannot happen any more (someone else owns the key, or the store rejects it)
};

OwnerWriteNext after_owner_write(OwnerWrite write, StoreError error);

// How long an owner write may be retried, from the moment of the claim: for the record's whole
// life. Safe at any time: the owner fence makes a write after a take-over (unknown_outcome: retry)
// or after expiry a no-op, and until then no other request can run the key.
std::chrono::milliseconds owner_write_horizon(const RoutePolicy& policy);

}  // namespace idem::core
