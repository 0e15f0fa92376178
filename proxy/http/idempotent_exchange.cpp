#include "http/idempotent_exchange.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "core/decision.hpp"
#include "core/problem.hpp"
#include "core/stored_headers.hpp"
#include "crypto/sha256.hpp"
#include "fingerprint/fingerprint.hpp"
#include "http/forwarding.hpp"
#include "http/proxy_metrics.hpp"
#include "http/proxying.hpp"
#include "http/replay_cache.hpp"
#include "http/shared_replay_cache.hpp"
#include "http/store_awaitable.hpp"
#include "http/upstream_pool.hpp"
#include "log/log.hpp"

// Note for every co_await in this file: arguments are named values, never braced temporaries
// (GCC 12 destroys some temporaries of a co_await full-expression twice).

namespace idem::http {
namespace asio = boost::asio;
using asio::use_awaitable;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

using HeaderValues = std::vector<std::pair<std::string_view, std::optional<std::string>>>;

// Values of the named fields, in the given order; repeated fields joined by ", " (RFC 9110 §5.3).
HeaderValues collect_headers(const Request& request, const std::vector<std::string>& names) {
  HeaderValues values;
  values.reserve(names.size());
  for (const auto& name : names) {
    std::optional<std::string> joined;
    auto [first, last] = request.equal_range(name);
    for (auto it = first; it != last; ++it) {
      if (!joined) joined.emplace(); else *joined += ", ";
      *joined += it->value();
    }
    values.emplace_back(name, std::move(joined));
  }
  return values;
}

core::StoredResponse status_only(const Response& response) {
  core::StoredResponse stored;
  stored.status = static_cast<int>(response.result_int());
  return stored;
}

// Logs never carry the raw key: it may be guessable or sensitive.
std::string key_hash(const std::string& key) { return crypto::to_hex(crypto::sha256(key)).substr(0, 16); }

bool worth_retrying(store::StoreError error) {
  return error == store::StoreError::unavailable || error == store::StoreError::timeout;
}

// Keeps writing a completion the store refused for lack of a connection, with capped backoff,
// until the lease it protects ends: after that another request may own the key.
asio::awaitable<void> retry_complete_in_background(WorkerServices& services, store::CompleteRequest request,
                                                   Clock::time_point lease_end, std::string route) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  milliseconds delay{100};
  store::StoreError error = store::StoreError::unavailable;
  while (Clock::now() + delay < lease_end) {
    timer.expires_after(delay);
    co_await timer.async_wait(asio::as_tuple(use_awaitable));
    error = co_await async_complete(services.store, request, use_awaitable);
    if (!worth_retrying(error)) break;
    delay = std::min(delay * 2, milliseconds{2'000});
  }
  if (error == store::StoreError::ok) {
    log::info("complete_recovered", {{"route", route}, {"key_sha256", key_hash(request.key)}});
  } else {
    // The response went to the client but is not stored: a retry after the lease will find the
    // record in flight and lapsed, i.e. an unknown outcome.
    log::error("complete_abandoned", {{"route", route}, {"key_sha256", key_hash(request.key)},
                                      {"status", request.response.status}, {"error", store::store_error_name(error)}});
  }
  services.background.finished();
}

class IdempotentExchange {
 public:
  IdempotentExchange(WorkerServices& services, const core::RoutePolicy& policy, Request& request,
                     std::string_view client_address, RequestTrace& trace)
      : services_(services), policy_(policy), request_(request), client_address_(client_address), trace_(trace) {}

  asio::awaitable<Response> run(std::string key, std::string_view path, std::string_view query) {
    claim_.scope = fingerprint::record_scope(policy_.name, collect_headers(request_, policy_.scope_headers));
    claim_.key = std::move(key);
    claim_.fingerprint = fingerprint_of(path, query);
    claim_.owner = crypto::random_token();
    claim_.ttl = policy_.ttl;
    claim_.lease = policy_.lease;
    claim_.take_over_lapsed_lease = policy_.unknown_outcome == core::UnknownOutcome::retry;
    trace_.key_sha256 = key_hash(claim_.key);

    if (auto cached = services_.cache.find(claim_.scope, claim_.key)) {
      trace_.cache_hit = true;
      co_return answer_from_cache(*cached, decision::replay);
    }
    if (services_.shared_cache != nullptr) {
      // Redis answers within its deadline or not at all (fallback): either way the store decides next.
      const SharedLookup shared = co_await async_shared_lookup(*services_.shared_cache, claim_.scope, claim_.key, use_awaitable);
      if (shared.outcome == SharedLookupOutcome::hit) {
        services_.cache.insert(claim_.scope, claim_.key, shared.record);
        co_return answer_from_cache(*shared.record, decision::replay_redis);
      }
    }

    claim_sent_at_ = Clock::now();
    auto [error, claimed] = co_await async_claim(services_.store, claim_, use_awaitable);
    note_store("claim", claim_sent_at_);
    if (error == store::StoreError::corrupt) co_return corrupt();
    if (error != store::StoreError::ok) co_return co_await store_unavailable(error);
    // A replay the store answered is offered to Redis, so the other proxies find it there. Only
    // here: the duplicates polling in wait_for_first leave that to the request that completes.
    remember_if_finished(claimed, true);
    core::Decision decision = core::decide(claimed, claim_.fingerprint, policy_);
    if (decision.action == core::Action::in_flight && policy_.in_flight == core::InFlightPolicy::wait) {
      co_return co_await wait_for_first(decision);
    }
    co_return co_await act(decision, claimed);
  }

 private:
  std::string fingerprint_of(std::string_view path, std::string_view query) const {
    fingerprint::RequestFacts facts;
    facts.method = request_.method_string();
    facts.path = path;
    facts.query = query;
    facts.headers = collect_headers(request_, policy_.fingerprint_headers);
    facts.content_type = request_[beast_http::field::content_type];
    facts.body = request_.body();
    return fingerprint::request_fingerprint(facts, policy_.ignore_json);
  }

  Response problem(const core::Problem& p) const { return problem_response(p, request_.version()); }

  // A finished record is immutable until it expires: the same decision the store's copy would
  // give, without a round trip. `replayed` labels a replay by where the copy came from.
  Response answer_from_cache(const CachedRecord& cached, std::string_view replayed) const {
    if (cached.fingerprint != claim_.fingerprint) {
      trace_.decision = decision::mismatch;
      return problem(core::fingerprint_mismatch_problem(policy_.key_header));
    }
    if (cached.state == core::RecordState::too_large) {
      trace_.decision = decision::too_large;
      return problem(core::too_large_to_replay_problem(cached.response.status, policy_.max_stored_body));
    }
    trace_.decision = replayed;
    return replay_response(cached.response, request_.version());
  }

  // A stored record that fails authentication is never replayed and never re-executed: the key
  // is answered with a 500 until the record expires or an operator looks at it.
  Response corrupt() const {
    trace_.decision = decision::corrupt;
    return problem(core::record_corrupt_problem());
  }

  void note_store(std::string_view operation, Clock::time_point started) {
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
    trace_.store += elapsed;
    services_.metrics.observe_store(operation, elapsed);
  }

  // Keeps a finished record the store returned: in the in-process cache, and in Redis when
  // `share` (the record is immutable until it expires, so any copy is as good as the store's).
  void remember_if_finished(const core::ClaimResult& claimed, bool share = false) {
    const core::Record& record = claimed.existing;
    if (claimed.claimed) return;
    if (record.state != core::RecordState::completed && record.state != core::RecordState::too_large) return;
    const bool to_shared = share && services_.shared_cache != nullptr;
    if (!services_.cache.enabled() && !to_shared) return;
    auto cached = std::make_shared<CachedRecord>();
    cached->fingerprint = record.fingerprint;
    cached->state = record.state;
    cached->response = record.response;
    // expires_in is the store's, measured when the claim ran: after claim_sent_at_.
    cached->expires_at = claim_sent_at_ + record.expires_in;
    if (to_shared) services_.shared_cache->put(claim_.scope, claim_.key, cached);
    services_.cache.insert(claim_.scope, claim_.key, std::move(cached));
  }

  void remember_completion(const store::CompleteRequest& completed) {
    if (!services_.cache.enabled() && services_.shared_cache == nullptr) return;
    auto cached = std::make_shared<CachedRecord>();
    cached->fingerprint = claim_.fingerprint;
    cached->state = completed.state;
    cached->response = completed.response;
    // The store set expires_at from its clock when the claim arrived, after claim_sent_at_.
    cached->expires_at = claim_sent_at_ + policy_.ttl;
    // Fire and forget: the write goes out now, the client's response does not wait for it.
    if (services_.shared_cache != nullptr) services_.shared_cache->put(claim_.scope, claim_.key, cached);
    services_.cache.insert(claim_.scope, claim_.key, std::move(cached));
  }

  asio::awaitable<Response> act(const core::Decision& decision, const core::ClaimResult& claimed) {
    switch (decision.action) {
      case core::Action::execute: co_return co_await execute();
      case core::Action::replay:
        trace_.decision = decision::replay;
        co_return replay_response(claimed.existing.response, request_.version());
      case core::Action::fingerprint_mismatch:
        trace_.decision = decision::mismatch;
        co_return problem(core::fingerprint_mismatch_problem(policy_.key_header));
      case core::Action::in_flight:
        trace_.decision = decision::in_flight;
        co_return problem(core::in_flight_problem(decision.retry_after));
      case core::Action::too_large_to_replay:
        trace_.decision = decision::too_large;
        co_return problem(core::too_large_to_replay_problem(claimed.existing.response.status, policy_.max_stored_body));
      case core::Action::outcome_unknown:
        trace_.decision = decision::unknown;
        co_return problem(core::outcome_unknown_problem());
    }
    co_return problem(core::internal_problem("unexpected decision"));
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
    asio::steady_timer timer(co_await asio::this_coro::executor);
    milliseconds delay{10};
    // Polls until the deadline, the last poll at the deadline itself: a first request finishing
    // just before wait_timeout still answers its duplicates.
    while (Clock::now() < deadline) {
      timer.expires_after(std::min<Clock::duration>(delay, deadline - Clock::now()));
      co_await timer.async_wait(asio::as_tuple(use_awaitable));
      delay = std::min(delay * 2, milliseconds{200});
      claim_sent_at_ = Clock::now();
      auto [error, claimed] = co_await async_claim(services_.store, claim_, use_awaitable);
      note_store("claim", claim_sent_at_);
      if (error == store::StoreError::corrupt) co_return corrupt();
      if (error != store::StoreError::ok) co_return co_await store_unavailable(error);
      remember_if_finished(claimed);
      decision = core::decide(claimed, claim_.fingerprint, policy_);
      if (decision.action != core::Action::in_flight) co_return co_await act(decision, claimed);
    }
    trace_.decision = decision::in_flight;
    co_return problem(core::in_flight_problem(decision.retry_after));
  }

  asio::awaitable<Response> store_unavailable(store::StoreError error) {
    log::warn("store_unavailable", {{"route", policy_.name}, {"error", store::store_error_name(error)}});
    if (policy_.store_unavailable == core::StoreUnavailable::fail_open) {
      trace_.decision = decision::unchecked;
      Response response = co_await forward_plain(services_, request_, client_address_, trace_);
      response.set("Idempotency-Status", "unchecked");
      co_return response;
    }
    trace_.decision = decision::store_unavailable;
    co_return problem(core::store_unavailable_problem(std::chrono::seconds(1)));
  }

  asio::awaitable<Response> execute() {
    const unsigned version = request_.version();
    prepare_upstream_request(request_, client_address_);
    services_.metrics.in_flight_records.fetch_add(1, std::memory_order_relaxed);
    struct InFlight {
      std::atomic<std::int64_t>& gauge;
      ~InFlight() { gauge.fetch_sub(1, std::memory_order_relaxed); }
    } in_flight{services_.metrics.in_flight_records};
    trace_.decision = decision::executed;
    UpstreamResult result = co_await services_.upstream.exchange(request_);
    trace_.upstream += result.elapsed;

    if (result.failure != UpstreamFailure::none) {
      if (nothing_sent(result.failure)) {
        trace_.decision = decision::released;
        co_await release();
      } else if (result.failure == UpstreamFailure::response_too_large) {
        // The upstream executed and answered; only the body is beyond what the proxy handles.
        core::StoredResponse stored = status_only(result.response);
        co_await complete(core::RecordState::too_large, std::move(stored));
      } else if (policy_.unknown_outcome == core::UnknownOutcome::lock) {
        trace_.decision = decision::unknown;
        // The request reached the upstream and no answer came back: at most once means the
        // record turns terminal `unknown` now, and every retry is told so.
        co_await mark_unknown(result.failure);
      }
      // unknown_outcome: retry leaves the record in flight; the first retry after the lease takes
      // it over and executes again (for upstreams that deduplicate on the forwarded key).
      co_return upstream_failure_response(result.failure, version);
    }

    Response& response = result.response;
    const core::Outcome outcome = core::classify_response(static_cast<int>(response.result_int()),
                                                          response["Idempotency-Transient"], response.body().size(), policy_);
    switch (outcome) {
      case core::Outcome::release:
        trace_.decision = decision::released;
        co_await release();
        break;
      case core::Outcome::store: {
        core::StoredResponse stored{static_cast<int>(response.result_int()),
                                    core::filter_for_storage(header_list(response), policy_), response.body()};
        co_await complete(core::RecordState::completed, std::move(stored));
        break;
      }
      case core::Outcome::store_too_large: {
        core::StoredResponse stored = status_only(response);
        co_await complete(core::RecordState::too_large, std::move(stored));
        break;
      }
    }
    prepare_client_response(response, false);
    co_return std::move(response);
  }

  asio::awaitable<void> complete(core::RecordState state, core::StoredResponse stored) {
    store::CompleteRequest request;
    request.scope = claim_.scope;
    request.key = claim_.key;
    request.owner = claim_.owner;
    request.state = state;
    request.response = std::move(stored);
    const auto started = Clock::now();
    const store::StoreError error = co_await async_complete(services_.store, request, use_awaitable);
    note_store("complete", started);
    if (error == store::StoreError::ok) {
      remember_completion(request);
      co_return;
    }
    log::error("complete_failed", {{"route", policy_.name}, {"key_sha256", key_hash(claim_.key)},
                                   {"error", store::store_error_name(error)}});
    if (worth_retrying(error)) {
      services_.background.started();
      asio::co_spawn(co_await asio::this_coro::executor,
                     retry_complete_in_background(services_, std::move(request), claim_sent_at_ + policy_.lease, policy_.name),
                     asio::detached);
    }
  }

  // The record this request claimed, as complete/release/mark_unknown name it.
  store::ReleaseRequest owned_record() const {
    store::ReleaseRequest owned;
    owned.scope = claim_.scope;
    owned.key = claim_.key;
    owned.owner = claim_.owner;
    return owned;
  }

  asio::awaitable<void> mark_unknown(UpstreamFailure failure) {
    const store::ReleaseRequest request = owned_record();
    const auto started = Clock::now();
    const store::StoreError error = co_await async_mark_unknown(services_.store, request, use_awaitable);
    note_store("mark_unknown", started);
    // Logged either way: an unknown outcome is what an operator must reconcile. If the write
    // failed, the record stays in flight and reads as unknown once its lease lapses.
    log::error("outcome_unknown", {{"route", policy_.name}, {"key_sha256", key_hash(claim_.key)},
                                   {"upstream_failure", upstream_failure_name(failure)},
                                   {"store", store::store_error_name(error)}});
  }

  asio::awaitable<void> release() {
    const store::ReleaseRequest request = owned_record();
    const auto started = Clock::now();
    const store::StoreError error = co_await async_release(services_.store, request, use_awaitable);
    note_store("release", started);
    if (error != store::StoreError::ok) {
      // The record stays in flight; its lease lapsing turns it into an unknown outcome, which is
      // the safe reading of "we could not record that nothing happened".
      log::warn("release_failed", {{"route", policy_.name}, {"key_sha256", key_hash(claim_.key)},
                                   {"error", store::store_error_name(error)}});
    }
  }

  WorkerServices& services_;
  const core::RoutePolicy& policy_;
  Request& request_;
  std::string_view client_address_;
  RequestTrace& trace_;
  store::ClaimRequest claim_;
  Clock::time_point claim_sent_at_{};  // lease and expiry are measured from here (a lower bound)
};

}  // namespace

asio::awaitable<Response> run_idempotent_exchange(WorkerServices& services, const core::RoutePolicy& policy,
                                                  Request& request, std::string_view client_address, std::string key,
                                                  std::string_view path, std::string_view query, RequestTrace& trace) {
  IdempotentExchange exchange(services, policy, request, client_address, trace);
  co_return co_await exchange.run(std::move(key), path, query);
}

}  // namespace idem::http
