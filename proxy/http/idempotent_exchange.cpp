#include "http/idempotent_exchange.hpp"

#include <algorithm>
#include <cassert>
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
#include "core/failure_policy.hpp"
#include "core/problem.hpp"
#include "core/request_target.hpp"
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

// One write that settles a claimed record (complete, release, mark_unknown), as the store takes it.
struct OwnerWriteRequest {
  core::OwnerWrite write = core::OwnerWrite::release;
  store::CompleteRequest complete;  // scope, key and owner for every write; state and response for complete
  std::chrono::milliseconds unknown_retention{0};  // mark_unknown
};

void send_owner_write(store::Store& store, const OwnerWriteRequest& request, store::DoneHandler done) {
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
        send_owner_write(store, request,
                         [handler = std::make_shared<decltype(handler)>(std::move(handler))](store::StoreError error) mutable {
                           (*handler)(error);
                         });
      },
      token);
}

// Runs an owner write the store did not confirm, again and again with capped backoff, until the
// store settles it or the record's life (owner_write_horizon, from the claim) ends. Every owner
// write is fenced by the owner token and idempotent for that owner, so repeating one that did take
// effect is harmless; after a take-over or an expiry it is a no-op.
asio::awaitable<void> settle_in_background(WorkerServices& services, OwnerWriteRequest request,
                                           Clock::time_point horizon, std::string route) {
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
    log::info(event + "_recovered", {{"route", route}, {"key_sha256", key_hash(request.complete.key)},
                                     {"attempts", attempts}, {"store", store::store_error_name(error)}});
  } else {
    // complete: the client had its response, but it is not stored; a retry finds the record in
    // flight, then lapsed (unknown). release/mark_unknown: the record stays in flight until its
    // lease lapses, then reads as unknown (lock) or is taken over (retry).
    log::error(event + "_abandoned", {{"route", route}, {"key_sha256", key_hash(request.complete.key)},
                                      {"attempts", attempts}, {"error", store::store_error_name(error)}});
  }
  services.background.finished();
}

class IdempotentExchange {
 public:
  IdempotentExchange(WorkerServices& services, const core::RoutePolicy& policy, Request& request,
                     std::string_view client_address, RequestTrace& trace)
      : services_(services), policy_(policy), request_(request), client_address_(client_address), trace_(trace) {}

  asio::awaitable<Response> run(std::string key, std::string_view path, std::string_view query) {
    executor_ = co_await asio::this_coro::executor;
    fingerprint::RequestScope scope = fingerprint::request_scope(
        policy_, core::scope_host(request_[beast_http::field::host]), collect_headers(request_, policy_.scope_headers));
    claim_.scope = std::move(scope.scope);
    claim_.legacy_scope = std::move(scope.legacy_scope);
    claim_.key = std::move(key);
    claim_.fingerprint = fingerprint_of(path, query);
    claim_.owner = crypto::random_token();
    claim_.ttl = policy_.ttl;
    claim_.lease = policy_.lease;
    claim_.take_over_lapsed_lease = policy_.unknown_outcome == core::UnknownOutcome::retry;
    // lock: a record nobody settles (we die mid-exchange) is an unknown outcome and lasts as long.
    if (!claim_.take_over_lapsed_lease) claim_.unsettled_retention = policy_.unknown_retention;
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
    if (error != store::StoreError::ok) co_return co_await claim_failed(error);
    // A replay the store answered is offered to Redis, so the other proxies find it there. Only
    // here: the duplicates polling in wait_for_first leave that to the request that completes.
    remember_if_finished(claimed, true);
    const core::Decision decision = core::decide(claimed, claim_.fingerprint, policy_);
    if (decision.action == core::Action::wait) co_return co_await wait_for_first(decision);
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
    core::Record record;
    record.fingerprint = cached.fingerprint;
    record.state = cached.state;
    record.response = cached.response;
    const core::Decision decision = core::decide(record, claim_.fingerprint, policy_);
    if (decision.action == core::Action::replay) {
      trace_.decision = replayed;
      return replay_response(cached.response, request_.version());
    }
    return refuse(decision, record);
  }

  // Every decision that neither executes nor replays: its problem, labelled for the trace.
  Response refuse(const core::Decision& decision, const core::Record& record) const {
    switch (decision.action) {
      case core::Action::fingerprint_mismatch: trace_.decision = decision::mismatch; break;
      case core::Action::in_flight:
      case core::Action::wait: trace_.decision = decision::in_flight; break;
      case core::Action::too_large_to_replay: trace_.decision = decision::too_large; break;
      case core::Action::outcome_unknown: trace_.decision = decision::unknown; break;
      case core::Action::execute:
      case core::Action::replay: assert(false && "refuse: not a refusal"); break;
    }
    return problem(core::decision_problem(decision, record, policy_));
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
      case core::Action::in_flight:
      case core::Action::wait:
      case core::Action::too_large_to_replay:
      case core::Action::outcome_unknown: co_return refuse(decision, claimed.existing);
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
      if (error != store::StoreError::ok) co_return co_await claim_failed(error);
      remember_if_finished(claimed);
      decision = core::decide(claimed, claim_.fingerprint, policy_);
      if (decision.action != core::Action::wait) co_return co_await act(decision, claimed);
    }
    trace_.decision = decision::in_flight;
    co_return problem(core::in_flight_problem(decision.retry_after));
  }

  // The claim (or a poll, which is a claim too) failed. A claim whose reply was lost may have
  // recorded this request as in flight: the fenced release frees the key behind the 503.
  asio::awaitable<Response> claim_failed(store::StoreError error) {
    const core::ClaimFailure failure = core::after_claim_failure(error, policy_);
    log::warn("store_unavailable", {{"route", policy_.name}, {"error", store::store_error_name(error)},
                                    {"answer", core::claim_failure_answer_name(failure.answer)},
                                    {"release_claim", failure.release_claim}});
    if (failure.release_claim) settle_later(core::OwnerWrite::release);
    switch (failure.answer) {
      case core::ClaimFailureAnswer::corrupt: co_return corrupt();
      case core::ClaimFailureAnswer::forward_unchecked: {
        trace_.decision = decision::unchecked;
        Response response = co_await forward_plain(services_, request_, client_address_, trace_);
        response.set("Idempotency-Status", "unchecked");
        co_return response;
      }
      case core::ClaimFailureAnswer::unavailable: break;
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
      switch (core::after_upstream_failure(failure_kind(result.failure), policy_)) {
        case core::RecordFate::release:
          co_await release_claim();
          break;
        case core::RecordFate::complete_too_large: {
          // The upstream executed and answered; only the body is beyond what the proxy handles.
          OwnerWriteRequest too_large = completion(core::RecordState::too_large, status_only(result.response));
          co_await settle(too_large);
          break;
        }
        case core::RecordFate::mark_unknown: {
          // The request reached the upstream and no answer came back: at most once means the
          // record turns terminal `unknown` now, and every retry is told so. Logged either way:
          // an unknown outcome is what an operator must reconcile.
          trace_.decision = decision::unknown;
          log::error("outcome_unknown", {{"route", policy_.name}, {"key_sha256", key_hash(claim_.key)},
                                         {"upstream_failure", upstream_failure_name(result.failure)}});
          const OwnerWriteRequest mark = owner_write(core::OwnerWrite::mark_unknown);
          co_await settle(mark);
          break;
        }
        case core::RecordFate::leave_in_flight:
          // unknown_outcome: retry: the first retry after the lease takes the key over and executes
          // again (for upstreams that deduplicate on the forwarded key).
          break;
      }
      co_return upstream_failure_response(result.failure, version);
    }

    Response& response = result.response;
    const core::Outcome outcome = core::classify_response(static_cast<int>(response.result_int()),
                                                          response["Idempotency-Transient"], response.body().size(), policy_);
    switch (outcome) {
      case core::Outcome::release:
        co_await release_claim();
        break;
      case core::Outcome::store: {
        core::StoredResponse stored{static_cast<int>(response.result_int()),
                                    core::filter_for_storage(header_list(response), policy_), response.body()};
        OwnerWriteRequest completed = completion(core::RecordState::completed, std::move(stored));
        co_await settle(completed);
        break;
      }
      case core::Outcome::store_too_large: {
        OwnerWriteRequest too_large = completion(core::RecordState::too_large, status_only(response));
        co_await settle(too_large);
        break;
      }
    }
    prepare_client_response(response, false);
    co_return std::move(response);
  }

  static core::UpstreamFailureKind failure_kind(UpstreamFailure failure) {
    if (nothing_sent(failure)) return core::UpstreamFailureKind::nothing_sent;
    if (failure == UpstreamFailure::response_too_large) return core::UpstreamFailureKind::response_too_large;
    return core::UpstreamFailureKind::outcome_unknown;
  }

  // The record this request claimed, named for an owner write.
  OwnerWriteRequest owner_write(core::OwnerWrite write) const {
    OwnerWriteRequest owned;
    owned.write = write;
    owned.complete.scope = claim_.scope;
    owned.complete.key = claim_.key;
    owned.complete.owner = claim_.owner;
    owned.complete.ttl = policy_.ttl;
    owned.unknown_retention = policy_.unknown_retention;
    return owned;
  }

  OwnerWriteRequest completion(core::RecordState state, core::StoredResponse stored) const {
    OwnerWriteRequest owned = owner_write(core::OwnerWrite::complete);
    owned.complete.state = state;
    owned.complete.response = std::move(stored);
    return owned;
  }

  // One owner write now; if the store did not confirm it, again in the background (the client's
  // answer does not wait for that). A completion is cached only once the store confirmed it.
  // `owned` is a named value of the caller's (see the note on co_await at the top of this file).
  asio::awaitable<void> settle(const OwnerWriteRequest& owned) {
    const core::OwnerWrite write = owned.write;
    const auto started = Clock::now();
    const store::StoreError error = co_await async_owner_write(services_.store, owned, use_awaitable);
    note_store(core::owner_write_name(write), started);
    switch (core::after_owner_write(write, error)) {
      case core::OwnerWriteNext::done:
        if (write == core::OwnerWrite::complete) remember_completion(owned.complete);
        co_return;
      case core::OwnerWriteNext::retry:
        log::warn(std::string(core::owner_write_name(write)) + "_failed",
                  {{"route", policy_.name}, {"key_sha256", key_hash(claim_.key)}, {"error", store::store_error_name(error)},
                   {"next", "retry_in_background"}});
        spawn_settle(owned);
        co_return;
      case core::OwnerWriteNext::give_up:
        log::error(std::string(core::owner_write_name(write)) + "_failed",
                   {{"route", policy_.name}, {"key_sha256", key_hash(claim_.key)}, {"error", store::store_error_name(error)},
                    {"next", "give_up"}});
        co_return;
    }
  }

  // The request did not run (nothing sent, or the upstream said "not processed"): free the key.
  asio::awaitable<void> release_claim() {
    trace_.decision = decision::released;
    const OwnerWriteRequest release = owner_write(core::OwnerWrite::release);
    co_await settle(release);
  }

  // An owner write that goes straight to the background (the fenced release of a claim whose
  // reply was lost: the client's 503 does not wait for it).
  void settle_later(core::OwnerWrite write) { spawn_settle(owner_write(write)); }

  void spawn_settle(OwnerWriteRequest owned) {
    services_.background.started();
    asio::co_spawn(executor_, settle_in_background(services_, std::move(owned), claim_sent_at_ + core::owner_write_horizon(policy_), policy_.name),
                   asio::detached);
  }

  WorkerServices& services_;
  const core::RoutePolicy& policy_;
  Request& request_;
  std::string_view client_address_;
  RequestTrace& trace_;
  store::ClaimRequest claim_;
  Clock::time_point claim_sent_at_{};  // lease and expiry are measured from here (a lower bound)
  asio::any_io_executor executor_;     // the worker's: background settles run there
};

}  // namespace

asio::awaitable<Response> run_idempotent_exchange(WorkerServices& services, const core::RoutePolicy& policy,
                                                  Request& request, std::string_view client_address, std::string key,
                                                  std::string_view path, std::string_view query, RequestTrace& trace) {
  IdempotentExchange exchange(services, policy, request, client_address, trace);
  co_return co_await exchange.run(std::move(key), path, query);
}

}  // namespace idem::http
