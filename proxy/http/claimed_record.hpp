#pragma once
// The record a request claimed, from the moment the store granted the claim (or may have: a claim
// whose reply was lost) until it is settled: completed with the upstream's answer, released, or
// marked unknown. It is made from the lookup that found the claim, as Envoy's cache filter hands
// its lookup to the insert that completes it, and is the only thing that writes the record: no
// one else holds the key's state, and no one else holds the key's pending guard.
//
// Every owner write is fenced by the claim's owner token and idempotent for that owner
// (core/failure_policy.hpp), so one the store did not confirm is simply run again: in the
// background, with capped backoff, until the store settles it or the record's life (ttl, from the
// claim) ends. The client's answer does not wait for that. While a release or a completion runs in
// the background it holds the key's guard in PendingSettlements (retries get 503 until it lands);
// a mark_unknown does not: the record already answers what it will say, outcome unknown.
//
// One per claim, used on the worker's io thread; background writes run on `executor` and are
// counted in services.background, so a drain waits for them. They copy what they need: the
// ClaimedRecord may go before they end.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "core/failure_policy.hpp"
#include "core/record.hpp"
#include "core/route.hpp"
#include "http/record_lookup.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"
#include "http/upstream.hpp"
#include "store/store.hpp"

namespace idem::http {

// One owner write, as the store takes it (what a background retry carries).
struct OwnerWriteRequest {
  core::OwnerWrite write = core::OwnerWrite::release;
  store::CompleteRequest complete;  // scope, key and owner for every write; state and response for complete
  std::chrono::milliseconds unknown_retention{0};  // mark_unknown
};

class ClaimedRecord {
 public:
  // `lookup` made the claim (its claim request outlives this, and so does `trace`, which gets the
  // store's time); `fingerprint_inputs` go into the in-process cache with the completion (may be
  // empty).
  ClaimedRecord(WorkerServices& services, const core::RoutePolicy& policy, RequestTrace& trace, RecordLookup&& lookup,
                std::string fingerprint_inputs, boost::asio::any_io_executor executor);

  // The request ran and its answer is kept: `completed` with the response, or `too_large` with its
  // status only. Cached once the store confirmed it. `response` is the caller's named value.
  boost::asio::awaitable<void> complete(core::RecordState state, core::StoredResponse&& response);
  // The request did not run (nothing sent, or the upstream said "not processed"): the key is free.
  boost::asio::awaitable<void> release();
  // The upstream exchange failed (`result.failure`): what becomes of the record is core's
  // after_upstream_failure: released, completed too_large with the status, marked `unknown`
  // (logged: an operator must reconcile it), or left in flight for a retry to take over.
  boost::asio::awaitable<void> settle_upstream_failure(const UpstreamResult& result);
  // The claim's reply was lost, so the claim may have recorded this request as in flight, which
  // will never run: released in the background only (the client is answered 503 at once).
  void release_in_background();

 private:
  OwnerWriteRequest owner_write(core::OwnerWrite write) const;
  // One owner write now; if the store did not confirm it, again in the background.
  boost::asio::awaitable<void> settle(const OwnerWriteRequest& owned);
  void settle_in_background(OwnerWriteRequest owned);

  WorkerServices& services_;
  const core::RoutePolicy& policy_;
  RequestTrace& trace_;
  RecordLookup lookup_;
  std::string fingerprint_inputs_;
  boost::asio::any_io_executor executor_;
};

}  // namespace idem::http
