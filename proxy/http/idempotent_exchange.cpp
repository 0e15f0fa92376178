#include "http/idempotent_exchange.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <optional>
#include <utility>

#include "core/decision.hpp"
#include "core/failure_policy.hpp"
#include "core/http_date.hpp"
#include "core/problem.hpp"
#include "core/stored_headers.hpp"
#include "http/claimed_record.hpp"
#include "http/message_rewriting.hpp"
#include "http/plain_forwarding.hpp"
#include "http/proxy_metrics.hpp"
#include "http/record_lookup.hpp"
#include "http/request_identity.hpp"
#include "http/upstream.hpp"
#include "log/log.hpp"

// Note for every co_await in this file: arguments are named values, never braced temporaries
// (GCC 12 destroys some temporaries of a co_await full-expression twice).

namespace idem::http {
namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

std::string_view replay_label(RecordSource source) {
  switch (source) {
    case RecordSource::shared_cache: return decision::replay_redis;
    case RecordSource::local_cache:
    case RecordSource::store: return decision::replay;
  }
  return decision::replay;
}

// Carries out core's decisions for one request; every "what now" is a core function (decide,
// after_claim_failure, classify_response). Who the request is lives in RequestIdentity; once the
// store granted the claim (or may have), the record is the ClaimedRecord's, the only writer of it.
class IdempotentExchange {
 public:
  IdempotentExchange(WorkerServices& services, const ForwardingTerms& terms, const core::RoutePolicy& policy,
                     const RequestParts& request, std::string_view client_address, RequestTrace& trace,
                     std::unique_ptr<OpenResponse>& rest)
      : services_(services),
        terms_(terms),
        rest_(rest),
        policy_(policy),
        request_(request),
        client_address_(client_address),
        trace_(trace),
        identity_(policy, request),
        lookup_(services, identity_.claim(), trace) {}

  asio::awaitable<Response> run(std::optional<std::string> key, std::string_view path, std::string_view query) {
    executor_ = co_await asio::this_coro::executor;
    if (const auto refused = identity_.prepare_claim(std::move(key), path, query, lookup_, services_.cache.enabled())) {
      if (*refused == core::KeyError::missing && policy_.key == core::KeyRequirement::optional) {
        co_return co_await forward_plain(services_, terms_, request_, client_address_, trace_, policy_.replay_headers,
                                         rest_);
      }
      trace_.decision = *refused == core::KeyError::missing ? decision::missing_key : decision::invalid_key;
      co_return problem(core::key_problem(*refused, identity_.key_error_detail(*refused)));
    }
    trace_.key = identity_.claim().key;
    claimed_at_ = std::chrono::system_clock::now();
    FoundRecord found = co_await lookup_.find();
    if (found.settle_pending) co_return settle_pending();
    if (found.error != store::StoreError::ok) co_return co_await claim_failed(found.error);
    if (identity_.takes_over_legacy_record(found.claim)) {
      // The same request's in-flight record from before the upgrade, its lease lapsed: claim again,
      // offering the legacy fingerprint, so the store hands it over as it would a current one.
      found = co_await lookup_.poll();
      if (found.settle_pending) co_return settle_pending();
      if (found.error != store::StoreError::ok) co_return co_await claim_failed(found.error);
    }
    const core::Decision decision = core::decide(found.claim, identity_.fingerprint_for(found.claim), policy_);
    if (decision.action == core::Action::wait) co_return co_await wait_for_first(decision);
    co_return co_await act(decision, found);
  }

 private:
  Response problem(const core::Problem& p) const {
    return problem_response(p, request_.version, services_.config->problem_docs_url());
  }

  // The claim is the record's now (granted, or perhaps granted: its reply was lost): the lookup
  // goes with it.
  ClaimedRecord claimed_record() {
    return ClaimedRecord(services_, policy_, trace_, std::move(lookup_), identity_.take_fingerprint_inputs(),
                         executor_);
  }

  asio::awaitable<Response> act(const core::Decision& decision, const FoundRecord& found) {
    switch (decision.action) {
      case core::Action::execute: co_return co_await execute();
      case core::Action::replay:
        trace_.decision = replay_label(found.source);
        co_return replay_response(found.response(), request_.version, policy_);
      case core::Action::fingerprint_mismatch: trace_.decision = decision::mismatch; break;
      case core::Action::in_flight:
      case core::Action::wait: trace_.decision = decision::in_flight; break;
      case core::Action::too_large_to_replay: trace_.decision = decision::too_large; break;
      case core::Action::outcome_unknown: trace_.decision = decision::unknown; break;
    }
    co_return problem(core::decision_problem(decision, found.claim.existing, policy_));
  }

  // in_flight: wait — hold the duplicate and poll the record with backoff until the first request
  // finishes (then answer as a retry would be answered: usually the replay) or wait_timeout passes
  // (409). Polling, not LISTEN/NOTIFY, so it works through PgBouncer and across proxies alike.
  asio::awaitable<Response> wait_for_first(core::Decision decision) {
    const std::size_t cap = services_.config->options.limits.max_waiting;
    if (services_.waiting.fetch_add(1) >= cap) {
      services_.waiting.fetch_sub(1);
      trace_.decision = decision::in_flight;
      co_return problem(core::in_flight_problem(decision.retry_after));
    }
    struct WaitSlot {
      std::atomic<std::size_t>& waiting;
      ~WaitSlot() { waiting.fetch_sub(1); }
    } slot{services_.waiting};

    const auto deadline = Clock::now() + policy_.wait_timeout;
    asio::steady_timer timer(executor_);
    milliseconds delay{10};
    // Polls until the deadline, the last poll at the deadline itself: a first request finishing
    // just before wait_timeout still answers its duplicates.
    while (Clock::now() < deadline) {
      timer.expires_after(std::min<Clock::duration>(delay, deadline - Clock::now()));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      delay = std::min(delay * 2, milliseconds{200});
      const FoundRecord found = co_await lookup_.poll();
      if (found.settle_pending) co_return settle_pending();
      if (found.error != store::StoreError::ok) co_return co_await claim_failed(found.error);
      decision = core::decide(found.claim, identity_.fingerprint_for(found.claim), policy_);
      if (decision.action != core::Action::wait) co_return co_await act(decision, found);
    }
    trace_.decision = decision::in_flight;
    co_return problem(core::in_flight_problem(decision.retry_after));
  }

  // The claim (or a poll, which is a claim too) failed. A claim whose reply was lost may have
  // recorded this request as in flight: the fenced release frees the key behind the 503.
  asio::awaitable<Response> claim_failed(store::StoreError error) {
    const core::ClaimFailure failure = core::after_claim_failure(error, policy_);
    log::warn("store_unavailable", {{"route", policy_.name},
                                    {"error", store::store_error_name(error)},
                                    {"answer", core::claim_failure_answer_name(failure.answer)},
                                    {"release_claim", failure.release_claim}});
    if (failure.release_claim) claimed_record().release_in_background();
    switch (failure.answer) {
      case core::ClaimFailureAnswer::corrupt:
        // Never replayed, never re-executed: a 500 until the record expires or an operator looks.
        trace_.decision = decision::corrupt;
        co_return problem(core::record_corrupt_problem());
      case core::ClaimFailureAnswer::forward_unchecked: {
        trace_.decision = decision::unchecked;
        Response response =
            co_await forward_plain(services_, terms_, request_, client_address_, trace_, policy_.replay_headers, rest_);
        response.set("Idempotency-Status", "unchecked");
        co_return response;
      }
      case core::ClaimFailureAnswer::unavailable: break;
    }
    trace_.decision = decision::store_unavailable;
    co_return problem(core::store_unavailable_problem(std::chrono::seconds(1)));
  }

  // This process is still settling the key's record (a release or completion the store has not
  // confirmed): not forwarded, and not answered from the record, which would read as an unknown
  // outcome once its lease lapsed. The client retries after Retry-After and gets the true answer
  // (a normal run, or the replay) once the write is through.
  Response settle_pending() const {
    trace_.decision = decision::store_unavailable;
    return problem(core::store_unavailable_problem(std::chrono::seconds(1)));
  }

  asio::awaitable<Response> execute() {
    ClaimedRecord claimed = claimed_record();
    const unsigned version = request_.version;
    const UpstreamRequest upstream_request(request_, client_address_);
    services_.metrics.in_flight_records.fetch_add(1, std::memory_order_relaxed);
    struct InFlight {
      std::atomic<std::int64_t>& gauge;
      ~InFlight() { gauge.fetch_sub(1, std::memory_order_relaxed); }
    } in_flight{services_.metrics.in_flight_records};
    trace_.decision = decision::executed;
    // The body is kept while it may be stored; past max_stored_body the record is settled at once
    // (too large to replay, or released) and the rest streams to this client: a long answer costs
    // neither memory nor lease time, and its outcome is never unknown.
    UpstreamResult result = co_await services_.upstreams[terms_.upstream]->exchange(
        upstream_request, policy_.max_stored_body, terms_.timeout);
    trace_.upstream += result.elapsed;
    if (result.failure != core::UpstreamFailure::none) {
      co_await claimed.settle_upstream_failure(result);
      co_return problem_response(core::upstream_failure_problem(result.failure), version,
                                 services_.config->problem_docs_url());
    }

    Response& response = result.response;
    const int status = static_cast<int>(response.result_int());
    const std::size_t body_size = result.rest ? policy_.max_stored_body + 1 : response.body().size();
    bool kept_a_record = true;
    switch (core::classify_response(status, response["Idempotency-Transient"], body_size, policy_)) {
      case core::Outcome::release:
        kept_a_record = false;
        co_await claimed.release();
        break;
      case core::Outcome::store: {
        core::StoredResponse stored{status, core::filter_for_storage(header_list(response), policy_), response.body()};
        if (policy_.key_expires_header) stored.headers.emplace_back(core::kKeyExpiresHeader, key_expires());
        co_await claimed.complete(core::RecordState::completed, std::move(stored));
        break;
      }
      case core::Outcome::store_too_large: {
        core::StoredResponse too_large{status, {}, {}};
        co_await claimed.complete(core::RecordState::too_large, std::move(too_large));
        break;
      }
    }
    if (result.rest) {
      // Its head is framed for the client where the rest is streamed.
      strip_upstream_fields(response, policy_.replay_headers);
      if (policy_.key_expires_header && kept_a_record) response.set(core::kKeyExpiresHeader, key_expires());
      rest_ = std::move(result.rest);
      co_return std::move(response);
    }
    prepare_client_response(response, false, policy_.replay_headers);
    if (policy_.key_expires_header && kept_a_record) response.set(core::kKeyExpiresHeader, key_expires());
    co_return std::move(response);
  }

  // Idempotency-Key-Expires: the record's expiry, from when this request's claim went out plus the
  // ttl, truncated to the second. The store's clock started the ttl a little later, so this is never
  // later than the record really expires (with synchronized clocks).
  std::string key_expires() const { return core::http_date(claimed_at_ + policy_.ttl); }

  WorkerServices& services_;
  const ForwardingTerms& terms_;         // the request's RoutedRequest's
  std::unique_ptr<OpenResponse>& rest_;  // the caller's: an answer's body to stream
  const core::RoutePolicy& policy_;
  const RequestParts& request_;
  std::string_view client_address_;
  RequestTrace& trace_;
  RequestIdentity identity_;
  RecordLookup lookup_;  // reads identity_'s claim, filled in by prepare_claim before first use
  std::chrono::system_clock::time_point claimed_at_;  // just before the first claim went out
  asio::any_io_executor executor_;                    // the worker's: background settles run there
};

}  // namespace

asio::awaitable<Response> run_idempotent_exchange(WorkerServices& services, const ForwardingTerms& terms,
                                                  const core::RoutePolicy& policy, const RequestParts& request,
                                                  std::string_view client_address, std::optional<std::string> key,
                                                  std::string_view path, std::string_view query, RequestTrace& trace,
                                                  std::unique_ptr<OpenResponse>& rest) {
  IdempotentExchange exchange(services, terms, policy, request, client_address, trace, rest);
  co_return co_await exchange.run(std::move(key), path, query);
}

}  // namespace idem::http
