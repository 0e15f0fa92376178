#include "http/claimed_record.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <utility>

#include "http/pending_settlements.hpp"
#include "http/proxy_metrics.hpp"
#include "log/log.hpp"

// Note for every co_await in this file: arguments are named values, never braced temporaries
// (GCC 12 destroys some temporaries of a co_await full-expression twice).

namespace idem::http {
namespace asio = boost::asio;
using asio::use_awaitable;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

void start_owner_write(store::Store& store, const OwnerWriteRequest& request, store::DoneHandler done) {
  const store::ReleaseRequest owned{request.complete.scope, request.complete.key, request.complete.owner,
                                    request.complete.ttl, request.unknown_retention};
  switch (request.write) {
    case core::OwnerWrite::complete: store.complete(request.complete, std::move(done)); return;
    case core::OwnerWrite::release: store.release(owned, std::move(done)); return;
    case core::OwnerWrite::mark_unknown: store.mark_unknown(owned, std::move(done)); return;
  }
}

template <typename CompletionToken>
auto async_owner_write(store::Store& store, const OwnerWriteRequest& request, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(store::StoreError)>(
      [&store, &request](auto handler) {
        start_owner_write(store, request,
                          [handler = std::make_shared<decltype(handler)>(std::move(handler))](
                              store::StoreError error) mutable { (*handler)(error); });
      },
      token);
}

// Runs `request` again and again with capped backoff until the store settles it or `horizon` (the
// record's life, from the claim) passes; logs <write>_recovered or <write>_abandoned. `held`
// (the key's pending guard, or nothing) is let go when it ends.
asio::awaitable<void> retry_until_settled(WorkerServices& services, OwnerWriteRequest request,
                                          Clock::time_point horizon, std::string route,
                                          PendingSettlements::Guard held) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  milliseconds delay{100};
  store::StoreError error = store::StoreError::unavailable;
  core::OwnerWriteNext next = core::OwnerWriteNext::retry;
  int attempts = 0;
  while (next == core::OwnerWriteNext::retry && Clock::now() + delay < horizon) {
    timer.expires_after(delay);
    co_await timer.async_wait(asio::as_tuple(use_awaitable));
    error = co_await async_owner_write(services.store, request, use_awaitable);
    ++attempts;
    next = core::after_owner_write(request.write, error);
    delay = std::min(delay * 2, milliseconds{2'000});
  }
  const std::string event = std::string(core::owner_write_name(request.write));
  if (next == core::OwnerWriteNext::done) {
    log::info(event + "_recovered", {{"route", route},
                                     {"key_sha256", key_hash(request.complete.key)},
                                     {"attempts", attempts},
                                     {"store", store::store_error_name(error)}});
  } else {
    // complete: the client had its response, but it is not stored; a retry finds the record in
    // flight, then lapsed (unknown). release/mark_unknown: the record stays in flight until its
    // lease lapses, then reads as unknown (lock) or is taken over (retry).
    log::error(event + "_abandoned", {{"route", route},
                                      {"key_sha256", key_hash(request.complete.key)},
                                      {"attempts", attempts},
                                      {"error", store::store_error_name(error)}});
  }
  held.reset();
  services.background.finished();
}

// A release or a completion in the background means this process knows the key's outcome (never
// ran, or its response) and the store does not yet: retries wait for it (pending_settlements.hpp).
// A mark_unknown does not: the record already answers what it will say, outcome unknown.
bool holds_key(core::OwnerWrite write) { return write != core::OwnerWrite::mark_unknown; }

}  // namespace

ClaimedRecord::ClaimedRecord(WorkerServices& services, const core::RoutePolicy& policy, RequestTrace& trace,
                             RecordLookup&& lookup, std::string fingerprint_inputs, asio::any_io_executor executor)
    : services_(services),
      policy_(policy),
      trace_(trace),
      lookup_(std::move(lookup)),
      fingerprint_inputs_(std::move(fingerprint_inputs)),
      executor_(std::move(executor)) {}

asio::awaitable<void> ClaimedRecord::complete(core::RecordState state, core::StoredResponse&& response) {
  OwnerWriteRequest completion = owner_write(core::OwnerWrite::complete);
  completion.complete.state = state;
  completion.complete.response = std::move(response);
  co_await settle(completion);
}

asio::awaitable<void> ClaimedRecord::release() {
  trace_.decision = decision::released;
  const OwnerWriteRequest release = owner_write(core::OwnerWrite::release);
  co_await settle(release);
}

asio::awaitable<void> ClaimedRecord::settle_upstream_failure(const UpstreamResult& result) {
  switch (core::after_upstream_failure(core::upstream_failure_kind(result.failure), policy_)) {
    case core::RecordFate::release: co_await release(); co_return;
    case core::RecordFate::complete_too_large: {
      // The upstream executed and answered; only the body is beyond what the proxy handles.
      core::StoredResponse too_large{static_cast<int>(result.response.result_int()), {}, {}};
      co_await complete(core::RecordState::too_large, std::move(too_large));
      co_return;
    }
    case core::RecordFate::mark_unknown: {
      // The request reached the upstream and no answer came back: at most once means the record
      // turns terminal `unknown` now, and every retry is told so. Logged either way: an unknown
      // outcome is what an operator must reconcile.
      trace_.decision = decision::unknown;
      log::error("outcome_unknown", {{"route", policy_.name},
                                     {"key_sha256", key_hash(trace_.key)},
                                     {"upstream_failure", core::upstream_failure_name(result.failure)}});
      const OwnerWriteRequest mark = owner_write(core::OwnerWrite::mark_unknown);
      co_await settle(mark);
      co_return;
    }
    case core::RecordFate::leave_in_flight:
      // unknown_outcome: retry: the first retry after the lease takes the key over and executes
      // again (for upstreams that deduplicate on the forwarded key).
      co_return;
  }
}

void ClaimedRecord::release_in_background() { settle_in_background(owner_write(core::OwnerWrite::release)); }

OwnerWriteRequest ClaimedRecord::owner_write(core::OwnerWrite write) const {
  const store::ClaimRequest& claim = lookup_.claim();
  OwnerWriteRequest owned;
  owned.write = write;
  owned.complete.scope = claim.scope;
  owned.complete.key = claim.key;
  owned.complete.owner = claim.owner;
  owned.complete.ttl = claim.ttl;
  owned.unknown_retention = policy_.unknown_retention;
  return owned;
}

// A completion is cached only once the store confirmed it. `owned` is a named value of the
// caller's (see the note on co_await at the top of this file).
asio::awaitable<void> ClaimedRecord::settle(const OwnerWriteRequest& owned) {
  const core::OwnerWrite write = owned.write;
  const auto started = Clock::now();
  const store::StoreError error = co_await async_owner_write(services_.store, owned, use_awaitable);
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
  trace_.store += elapsed;
  services_.metrics.observe_store(core::owner_write_name(write), elapsed);
  const core::OwnerWriteNext next = core::after_owner_write(write, error);
  if (next == core::OwnerWriteNext::done) {
    if (write == core::OwnerWrite::complete)
      lookup_.remember_completion(owned.complete.state, owned.complete.response, std::move(fingerprint_inputs_));
    co_return;
  }
  const bool retry = next == core::OwnerWriteNext::retry;
  log::write(retry ? log::Level::warn : log::Level::error, std::string(core::owner_write_name(write)) + "_failed",
             {{"route", policy_.name},
              {"key_sha256", key_hash(trace_.key)},
              {"error", store::store_error_name(error)},
              {"next", retry ? "retry_in_background" : "give_up"}});
  if (retry) settle_in_background(owned);
}

void ClaimedRecord::settle_in_background(OwnerWriteRequest owned) {
  services_.background.started();
  PendingSettlements::Guard held;
  if (holds_key(owned.write)) held = services_.pending_settlements.hold(owned.complete.scope, owned.complete.key);
  const Clock::time_point horizon = lookup_.claim_sent_at() + core::owner_write_horizon(policy_);
  asio::co_spawn(executor_, retry_until_settled(services_, std::move(owned), horizon, policy_.name, std::move(held)),
                 asio::detached);
}

}  // namespace idem::http
