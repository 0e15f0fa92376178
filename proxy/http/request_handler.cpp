#include "http/request_handler.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/decision.hpp"
#include "core/idempotency_key.hpp"
#include "core/problem.hpp"
#include "core/route.hpp"
#include "core/stored_headers.hpp"
#include "crypto/sha256.hpp"
#include "fingerprint/fingerprint.hpp"
#include "http/forwarding.hpp"
#include "http/store_awaitable.hpp"
#include "http/upstream_pool.hpp"
#include "log/log.hpp"

namespace idem::http {
namespace asio = boost::asio;
using asio::use_awaitable;

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

Response upstream_failure_response(UpstreamFailure failure, unsigned version) {
  switch (failure) {
    case UpstreamFailure::none: break;
    case UpstreamFailure::connect_failed:
      return problem_response(core::upstream_unreachable_problem("the upstream refused or did not accept the connection"), version);
    case UpstreamFailure::pool_exhausted: {
      auto problem = core::upstream_unreachable_problem("every upstream connection of this proxy is busy");
      problem.status = 503;
      problem.retry_after = std::chrono::seconds(1);
      return problem_response(problem, version);
    }
    case UpstreamFailure::timeout: return problem_response(core::upstream_timeout_problem(), version);
    case UpstreamFailure::connection_lost:
      return problem_response(core::upstream_bad_response_problem("the upstream closed the connection without a complete response"), version);
    case UpstreamFailure::bad_response:
      return problem_response(core::upstream_bad_response_problem("the upstream sent a malformed HTTP response"), version);
    case UpstreamFailure::response_too_large:
      return problem_response(core::upstream_bad_response_problem("the upstream response exceeded limits.max_response_body"), version);
  }
  return problem_response(core::internal_problem("unexpected upstream state"), version);
}

// Forwards without idempotency handling.
asio::awaitable<Response> forward_plain(WorkerServices& services, Request& request, std::string_view client_address) {
  const bool head = request.method() == beast_http::verb::head;
  const unsigned version = request.version();
  prepare_upstream_request(request, client_address);
  UpstreamResult result = co_await services.upstream.exchange(request);
  if (result.failure != UpstreamFailure::none) co_return upstream_failure_response(result.failure, version);
  prepare_client_response(result.response, head);
  co_return std::move(result.response);
}

class IdempotentExchange {
 public:
  IdempotentExchange(WorkerServices& services, const core::RoutePolicy& policy, Request& request,
                     std::string_view client_address)
      : services_(services), policy_(policy), request_(request), client_address_(client_address) {}

  asio::awaitable<Response> run(std::string key, std::string_view path, std::string_view query) {
    claim_.scope = fingerprint::record_scope(policy_.name, collect_headers(request_, policy_.scope_headers));
    claim_.key = std::move(key);
    claim_.fingerprint = fingerprint_of(path, query);
    claim_.owner = crypto::random_token();
    claim_.ttl = policy_.ttl;
    claim_.lease = policy_.lease;
    claim_.take_over_lapsed_lease = policy_.unknown_outcome == core::UnknownOutcome::retry;

    auto [error, claimed] = co_await async_claim(services_.store, claim_, use_awaitable);
    if (error != store::StoreError::ok) co_return co_await store_unavailable(error);

    const core::Decision decision = core::decide(claimed, claim_.fingerprint, policy_);
    switch (decision.action) {
      case core::Action::execute: co_return co_await execute();
      case core::Action::replay: co_return replay_response(claimed.existing.response, request_.version());
      case core::Action::fingerprint_mismatch:
        co_return problem(core::fingerprint_mismatch_problem(policy_.key_header));
      case core::Action::in_flight: co_return problem(core::in_flight_problem(decision.retry_after));
      case core::Action::too_large_to_replay:
        co_return problem(core::too_large_to_replay_problem(claimed.existing.response.status, policy_.max_stored_body));
      case core::Action::outcome_unknown: co_return problem(core::outcome_unknown_problem());
    }
    co_return problem(core::internal_problem("unexpected decision"));
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

  // Note for every co_await in this file: arguments are named values, never braced temporaries
  // (GCC 12 destroys some temporaries of a co_await full-expression twice).
  static core::StoredResponse status_only(const Response& response) {
    core::StoredResponse stored;
    stored.status = static_cast<int>(response.result_int());
    return stored;
  }

  Response problem(const core::Problem& p) const { return problem_response(p, request_.version()); }

  asio::awaitable<Response> store_unavailable(store::StoreError error) {
    log::warn("store_unavailable", {{"route", policy_.name}, {"error", store::store_error_name(error)}});
    if (policy_.store_unavailable == core::StoreUnavailable::fail_open) {
      Response response = co_await forward_plain(services_, request_, client_address_);
      response.set("Idempotency-Status", "unchecked");
      co_return response;
    }
    co_return problem(core::store_unavailable_problem(std::chrono::seconds(1)));
  }

  asio::awaitable<Response> execute() {
    const unsigned version = request_.version();
    prepare_upstream_request(request_, client_address_);
    UpstreamResult result = co_await services_.upstream.exchange(request_);

    if (result.failure != UpstreamFailure::none) {
      if (nothing_sent(result.failure)) {
        co_await release();
      } else if (result.failure == UpstreamFailure::response_too_large) {
        // The upstream executed and answered; only the body is beyond what the proxy handles.
        core::StoredResponse stored = status_only(result.response);
        co_await complete(core::RecordState::too_large, std::move(stored));
      }
      // Otherwise the outcome is unknown: the record stays in flight until its lease lapses, and
      // the route's unknown_outcome policy decides what a retry gets then.
      co_return upstream_failure_response(result.failure, version);
    }

    Response& response = result.response;
    const core::Outcome outcome = core::classify_response(
        static_cast<int>(response.result_int()), response["Idempotency-Transient"], response.body().size(), policy_);
    switch (outcome) {
      case core::Outcome::release: co_await release(); break;
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
    const store::StoreError error = co_await async_complete(services_.store, request, use_awaitable);
    if (error != store::StoreError::ok) {
      log::error("complete_failed", {{"route", policy_.name}, {"key_sha256", key_hash()},
                                     {"error", store::store_error_name(error)}});
    }
  }

  asio::awaitable<void> release() {
    store::ReleaseRequest request;
    request.scope = claim_.scope;
    request.key = claim_.key;
    request.owner = claim_.owner;
    const store::StoreError error = co_await async_release(services_.store, request, use_awaitable);
    if (error != store::StoreError::ok) {
      log::warn("release_failed", {{"route", policy_.name}, {"key_sha256", key_hash()},
                                   {"error", store::store_error_name(error)}});
    }
  }

  // Logs never carry the raw key: it may be guessable or sensitive.
  std::string key_hash() const { return crypto::to_hex(crypto::sha256(claim_.key)).substr(0, 16); }

  WorkerServices& services_;
  const core::RoutePolicy& policy_;
  Request& request_;
  std::string_view client_address_;
  store::ClaimRequest claim_;
};

}  // namespace

asio::awaitable<Response> handle_request(WorkerServices& services, Request& request, std::string_view client_address) {
  // Hold this request's configuration snapshot for its whole life.
  const std::shared_ptr<const RuntimeConfig> config = services.config;
  const std::string target{request.target()};
  const auto question = target.find('?');
  const std::string_view path = std::string_view(target).substr(0, question);
  const std::string_view query =
      question == std::string::npos ? std::string_view{} : std::string_view(target).substr(question + 1);
  const std::string_view method = request.method_string();

  const core::Route* route = config->routes.match(method, path);
  if (route == nullptr || core::is_safe_method(method) || route->policy.key == core::KeyRequirement::off) {
    co_return co_await forward_plain(services, request, client_address);
  }
  const core::RoutePolicy& policy = route->policy;

  std::vector<std::string_view> key_fields;
  auto [first, last] = request.equal_range(policy.key_header);
  for (auto it = first; it != last; ++it) key_fields.push_back(it->value());
  auto parsed = core::parse_idempotency_key(key_fields, policy.max_key_length);
  if (const auto* error = std::get_if<core::KeyError>(&parsed)) {
    if (*error == core::KeyError::missing && policy.key == core::KeyRequirement::optional) {
      co_return co_await forward_plain(services, request, client_address);
    }
    co_return problem_response(core::key_problem(*error, policy.key_header, policy.max_key_length), request.version());
  }

  IdempotentExchange exchange(services, policy, request, client_address);
  std::string key = std::move(std::get<std::string>(parsed));
  co_return co_await exchange.run(std::move(key), path, query);
}

}  // namespace idem::http
