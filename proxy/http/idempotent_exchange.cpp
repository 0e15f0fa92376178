#include "http/idempotent_exchange.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/string.hpp>
#include <cassert>
#include <chrono>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "core/decision.hpp"
#include "core/failure_policy.hpp"
#include "core/http_date.hpp"
#include "core/key_source.hpp"
#include "core/field_values.hpp"
#include "core/problem.hpp"
#include "core/request_target.hpp"
#include "core/stored_headers.hpp"
#include "fingerprint/fingerprint.hpp"
#include "http/message_rewriting.hpp"
#include "http/plain_forwarding.hpp"
#include "http/proxy_metrics.hpp"
#include "http/record_lookup.hpp"
#include "http/record_settlement.hpp"
#include "http/upstream.hpp"
#include "log/log.hpp"

// Note for every co_await in this file: arguments are named values, never braced temporaries
// (GCC 12 destroys some temporaries of a co_await full-expression twice).

namespace idem::http {
namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

using HeaderValues = std::vector<std::pair<std::string_view, std::optional<std::string>>>;

// Values of the named fields, in the given order.
HeaderValues collect_headers(const RequestParts& request, const std::vector<std::string>& names) {
  HeaderValues values;
  values.reserve(names.size());
  for (const auto& name : names) {
    std::optional<std::string> joined;
    for (const FieldView& field : request.fields) {
      if (boost::beast::iequals(field.name, name)) core::append_field_line(joined, field.value);
    }
    values.emplace_back(name, std::move(joined));
  }
  return values;
}

// The first line of a field, as Beast's operator[] reads it; empty when absent.
std::string_view first_value(const RequestParts& request, beast_http::field id) {
  for (const FieldView& field : request.fields) {
    if (field.id == id) return field.value;
  }
  return {};
}

core::StoredResponse status_only(const Response& response) {
  core::StoredResponse stored;
  stored.status = static_cast<int>(response.result_int());
  return stored;
}

std::string_view replay_label(RecordSource source) {
  switch (source) {
    case RecordSource::shared_cache: return decision::replay_redis;
    case RecordSource::local_cache:
    case RecordSource::store: return decision::replay;
  }
  return decision::replay;
}

// Carries out core's decisions for one request; every "what now" is a core function
// (decide, after_claim_failure, after_upstream_failure, classify_response, after_owner_write).
class IdempotentExchange {
 public:
  IdempotentExchange(WorkerServices& services, const core::RoutePolicy& policy, const RequestParts& request,
                     std::string_view client_address, RequestTrace& trace)
      : services_(services),
        policy_(policy),
        request_(request),
        client_address_(client_address),
        trace_(trace),
        lookup_(services, claim_, trace) {}

  asio::awaitable<Response> run(std::optional<std::string> key, std::string_view path, std::string_view query) {
    executor_ = co_await asio::this_coro::executor;
    if (const std::optional<core::KeyError> refused = prepare_claim(std::move(key), path, query)) {
      if (*refused == core::KeyError::missing && policy_.key == core::KeyRequirement::optional) {
        co_return co_await forward_plain(services_, request_, client_address_, trace_, policy_.replay_headers);
      }
      trace_.decision = *refused == core::KeyError::missing ? decision::missing_key : decision::invalid_key;
      co_return problem(core::key_problem(
          *refused, core::body_key_error_detail(*refused, body_key_, policy_.key_from_json, policy_.max_key_length)));
    }
    FoundRecord found = co_await lookup_.find();
    if (found.settle_pending) co_return settle_pending();
    if (found.error != store::StoreError::ok) co_return co_await claim_failed(found.error);
    if (takes_over_legacy_record(found.claim)) {
      // The same request's in-flight record from before the upgrade, its lease lapsed: claim again,
      // offering the legacy fingerprint, so the store hands it over as it would a current one.
      claim_.legacy_fingerprint = *legacy_fingerprint_;
      found = co_await lookup_.poll();
      if (found.settle_pending) co_return settle_pending();
      if (found.error != store::StoreError::ok) co_return co_await claim_failed(found.error);
    }
    const core::Decision decision = core::decide(found.claim, fingerprint_for(found.claim), policy_);
    if (decision.action == core::Action::wait) co_return co_await wait_for_first(decision);
    co_return co_await act(decision, found);
  }

 private:
  // The claim this request makes; when the key is read from the body (`key` absent), the reason
  // the body holds no usable key instead.
  std::optional<core::KeyError> prepare_claim(std::optional<std::string> key, std::string_view path,
                                              std::string_view query) {
    facts_.method = request_.method_string;
    facts_.path = path;
    facts_.query = query;
    facts_.headers = collect_headers(request_, policy_.fingerprint_headers);
    facts_.content_type = first_value(request_, beast_http::field::content_type);
    facts_.body = request_.body;
    const bool header_key = key.has_value();
    if (header_key) {
      claim_.key = std::move(*key);  // the fingerprint once the scope is known (header_keyed_fingerprint)
    } else {
      // One parse of the body: the fingerprint's canonicalization reads the key too.
      claim_.fingerprint =
          fingerprint::request_fingerprint(facts_, policy_.ignore_json, policy_.key_from_json, body_key_);
      auto from_body = core::body_key(body_key_, policy_.max_key_length);
      if (const auto* error = std::get_if<core::KeyError>(&from_body)) return *error;
      claim_.key = std::move(std::get<std::string>(from_body));
    }
    fingerprint::RequestScope scope =
        fingerprint::request_scope(policy_, core::scope_host(first_value(request_, beast_http::field::host)),
                                   collect_headers(request_, policy_.scope_headers));
    claim_.scope = std::move(scope.scope);
    claim_.legacy_scope = std::move(scope.legacy_scope);
    if (header_key) claim_.fingerprint = header_keyed_fingerprint();
    claim_.ttl = policy_.ttl;
    claim_.lease = policy_.lease;
    claim_.take_over_lapsed_lease = policy_.unknown_outcome == core::UnknownOutcome::retry;
    // lock: a record nobody settles (we die mid-exchange) is an unknown outcome and lasts as long.
    if (!claim_.take_over_lapsed_lease) claim_.unsettled_retention = policy_.unknown_retention;
    trace_.key = claim_.key;
    claimed_at_ = std::chrono::system_clock::now();
    return std::nullopt;
  }

  // A retry repeats its first request byte for byte: when the in-process cache holds this key's
  // record with exactly this request's fingerprint inputs, the record's fingerprint is this
  // request's too, and the body is not canonicalized again. Any other request is fingerprinted.
  // (A key read from the body is only known after the body's parse: those are always fingerprinted.)
  std::string header_keyed_fingerprint() {
    const cache::CachedRecord* cached = lookup_.find_local();
    if (cached != nullptr) {
      if (fingerprint::has_fingerprint_inputs(facts_, policy_.ignore_json, cached->fingerprint_inputs))
        return cached->fingerprint;
    } else if (services_.cache.enabled()) {
      // Perhaps the first request: kept for its completion (facts_ views a request execute() rewrites).
      fingerprint_inputs_ = fingerprint::fingerprint_inputs(facts_, policy_.ignore_json);
    }
    return fingerprint::request_fingerprint(facts_, policy_.ignore_json);
  }

  // This request's fingerprint in the scheme of the record the claim found, for decide(): the
  // current one, computed up front, unless the record was made before the current scheme (a "v1:"
  // fingerprint, during its ttl after the upgrade): then the v1 fingerprint, computed once, here.
  const std::string& fingerprint_for(const core::ClaimResult& claim) {
    if (claim.claimed ||
        fingerprint::fingerprint_scheme(claim.existing.fingerprint) != fingerprint::FingerprintScheme::v1)
      return claim_.fingerprint;
    if (!legacy_fingerprint_) {
      legacy_fingerprint_ =
          fingerprint::request_fingerprint(facts_, policy_.ignore_json, fingerprint::FingerprintScheme::v1);
    }
    return *legacy_fingerprint_;
  }

  // unknown_outcome: retry, and the claim found this request's v1 in-flight record with a lapsed
  // lease, which the store takes over only when the claim offers the v1 fingerprint too.
  bool takes_over_legacy_record(const core::ClaimResult& claim) {
    const core::Record& existing = claim.existing;
    return !claim.claimed && claim_.take_over_lapsed_lease && claim_.legacy_fingerprint.empty() &&
           !claim.existing_under_legacy_scope && core::lease_lapsed(existing.state, existing.lease_remaining) &&
           existing.fingerprint == fingerprint_for(claim) && existing.fingerprint != claim_.fingerprint;
  }

  Response problem(const core::Problem& p) const { return problem_response(p, request_.version); }

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
    const std::size_t cap = services_.config->config.limits.max_waiting;
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
      decision = core::decide(found.claim, fingerprint_for(found.claim), policy_);
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
    if (failure.release_claim) settle_later(owner_write(core::OwnerWrite::release));
    switch (failure.answer) {
      case core::ClaimFailureAnswer::corrupt:
        // Never replayed, never re-executed: a 500 until the record expires or an operator looks.
        trace_.decision = decision::corrupt;
        co_return problem(core::record_corrupt_problem());
      case core::ClaimFailureAnswer::forward_unchecked: {
        trace_.decision = decision::unchecked;
        Response response =
            co_await forward_plain(services_, request_, client_address_, trace_, policy_.replay_headers);
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
    const unsigned version = request_.version;
    const UpstreamRequest upstream_request(request_, client_address_);
    services_.metrics.in_flight_records.fetch_add(1, std::memory_order_relaxed);
    struct InFlight {
      std::atomic<std::int64_t>& gauge;
      ~InFlight() { gauge.fetch_sub(1, std::memory_order_relaxed); }
    } in_flight{services_.metrics.in_flight_records};
    trace_.decision = decision::executed;
    UpstreamResult result = co_await services_.upstream.exchange(upstream_request);
    trace_.upstream += result.elapsed;
    if (result.failure != core::UpstreamFailure::none) {
      co_await upstream_failed(result);
      co_return problem_response(core::upstream_failure_problem(result.failure), version);
    }

    Response& response = result.response;
    const int status = static_cast<int>(response.result_int());
    bool kept_a_record = true;
    switch (core::classify_response(status, response["Idempotency-Transient"], response.body().size(), policy_)) {
      case core::Outcome::release:
        kept_a_record = false;
        co_await release_claim();
        break;
      case core::Outcome::store: {
        core::StoredResponse stored{status, core::filter_for_storage(header_list(response), policy_), response.body()};
        if (policy_.key_expires_header) stored.headers.emplace_back(core::kKeyExpiresHeader, key_expires());
        const OwnerWriteRequest completed = completion(core::RecordState::completed, std::move(stored));
        co_await settle(completed);
        break;
      }
      case core::Outcome::store_too_large: {
        const OwnerWriteRequest too_large = completion(core::RecordState::too_large, status_only(response));
        co_await settle(too_large);
        break;
      }
    }
    prepare_client_response(response, false, policy_.replay_headers);
    if (policy_.key_expires_header && kept_a_record) response.set(core::kKeyExpiresHeader, key_expires());
    co_return std::move(response);
  }

  asio::awaitable<void> upstream_failed(const UpstreamResult& result) {
    switch (core::after_upstream_failure(core::upstream_failure_kind(result.failure), policy_)) {
      case core::RecordFate::release: co_await release_claim(); co_return;
      case core::RecordFate::complete_too_large: {
        // The upstream executed and answered; only the body is beyond what the proxy handles.
        const OwnerWriteRequest too_large = completion(core::RecordState::too_large, status_only(result.response));
        co_await settle(too_large);
        co_return;
      }
      case core::RecordFate::mark_unknown: {
        // The request reached the upstream and no answer came back: at most once means the
        // record turns terminal `unknown` now, and every retry is told so. Logged either way:
        // an unknown outcome is what an operator must reconcile.
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

  // Idempotency-Key-Expires: the record's expiry, from when this request's claim went out plus the
  // ttl, truncated to the second. The store's clock started the ttl a little later, so this is never
  // later than the record really expires (with synchronized clocks).
  std::string key_expires() const { return core::http_date(claimed_at_ + policy_.ttl); }

  OwnerWriteRequest owner_write(core::OwnerWrite write) const {
    return owner_write_request(claim_, write, policy_.unknown_retention);
  }

  OwnerWriteRequest completion(core::RecordState state, core::StoredResponse stored) const {
    OwnerWriteRequest owned = owner_write(core::OwnerWrite::complete);
    owned.complete.state = state;
    owned.complete.response = std::move(stored);
    return owned;
  }

  // The request did not run (nothing sent, or the upstream said "not processed"): free the key.
  asio::awaitable<void> release_claim() {
    trace_.decision = decision::released;
    const OwnerWriteRequest release = owner_write(core::OwnerWrite::release);
    co_await settle(release);
  }

  // One owner write now; if the store did not confirm it, again in the background (the client's
  // answer does not wait for that). A completion is cached only once the store confirmed it.
  // `owned` is a named value of the caller's (see the note on co_await at the top of this file).
  asio::awaitable<void> settle(const OwnerWriteRequest& owned) {
    const core::OwnerWrite write = owned.write;
    const auto started = Clock::now();
    const store::StoreError error = co_await send_owner_write(services_.store, owned);
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
    if (retry) settle_later(owned);
  }

  void settle_later(OwnerWriteRequest owned) {
    settle_in_background(services_, executor_, std::move(owned),
                         lookup_.claim_sent_at() + core::owner_write_horizon(policy_), policy_.name);
  }

  WorkerServices& services_;
  const core::RoutePolicy& policy_;
  const RequestParts& request_;
  std::string_view client_address_;
  RequestTrace& trace_;
  fingerprint::RequestFacts facts_;                   // views into request_, valid until execute() rewrites it
  std::chrono::system_clock::time_point claimed_at_;  // just before the first claim went out
  core::BodyKeyLookup body_key_;                      // what key_from_json found, when the key is read from the body
  std::optional<std::string> legacy_fingerprint_;     // v1, computed when a v1 record is found
  std::string fingerprint_inputs_;                    // kept with this request's completion in the in-process cache
  store::ClaimRequest claim_;
  RecordLookup lookup_;             // reads claim_, filled in by prepare_claim before first use
  asio::any_io_executor executor_;  // the worker's: background settles run there
};

}  // namespace

asio::awaitable<Response> run_idempotent_exchange(WorkerServices& services, const core::RoutePolicy& policy,
                                                  const RequestParts& request, std::string_view client_address,
                                                  std::optional<std::string> key, std::string_view path,
                                                  std::string_view query, RequestTrace& trace) {
  IdempotentExchange exchange(services, policy, request, client_address, trace);
  co_return co_await exchange.run(std::move(key), path, query);
}

}  // namespace idem::http
