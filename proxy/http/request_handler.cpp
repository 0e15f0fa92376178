#include "http/request_handler.hpp"

#include <boost/beast/core/string.hpp>
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/idempotency_key.hpp"
#include "core/key_format.hpp"
#include "core/key_source.hpp"
#include "core/problem.hpp"
#include "core/route.hpp"
#include "http/message_rewriting.hpp"
#include "http/idempotent_exchange.hpp"
#include "http/plain_forwarding.hpp"

namespace idem::http {
namespace asio = boost::asio;

namespace {

// Whether a line of the route's key header is in the head.
bool key_header_sent(const RequestParts& request, const core::RoutePolicy& policy) {
  return std::any_of(request.fields.begin(), request.fields.end(),
                     [&](const FieldView& field) { return boost::beast::iequals(field.name, policy.key_header); });
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// The Host field's value, looked up only when some route matches on it.
std::string_view host_of(const RuntimeConfig& config, const RequestParts& head) {
  if (!config.routes_by_host) return {};
  for (const FieldView& field : head.fields) {
    if (field.id == boost::beast::http::field::host) return field.value;
  }
  return {};
}

}  // namespace

RoutedRequest route_request(const RuntimeConfig& config, const RequestParts& head) {
  const core::Route* route = config.routes.match(head.method_string, path_of(head.target), host_of(config, head));
  const core::RoutePolicy* policy = route != nullptr ? &route->policy : nullptr;
  // Only an optional key's presence matters (core/body_handling.hpp): the fields are not walked
  // for the others.
  const bool key_sent =
      policy != nullptr && policy->key == core::KeyRequirement::optional && key_header_sent(head, *policy);
  return {route, core::body_handling(policy, head.method_string, key_sent), key_sent, config.terms_for(route)};
}

const std::vector<std::string>& replay_headers_of(const core::Route* route) {
  static const std::vector<std::string> kUnroutedReplayHeaders = core::RoutePolicy{}.replay_headers;
  return route != nullptr ? route->policy.replay_headers : kUnroutedReplayHeaders;
}

asio::awaitable<Response> handle_request(WorkerServices& services, const RoutedRequest& routed,
                                         const RequestParts& received, std::string_view client_address,
                                         RequestTrace& trace, std::unique_ptr<OpenResponse>& rest) {
  const std::string_view target = received.target;
  const auto question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query = question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);

  const core::Route* route = routed.route;
  if (route != nullptr) trace.route = route->policy.name;
  const std::vector<std::string>& replay_headers = replay_headers_of(route);
  // (The connection streams these instead; read whole, they are still proxied plainly.)
  if (routed.handling == core::BodyHandling::streamed) {
    co_return co_await forward_plain(services, routed.terms, received, client_address, trace, replay_headers, rest);
  }
  const core::RoutePolicy& policy = route->policy;

  std::vector<std::string_view> key_fields;
  for (const FieldView& field : received.fields) {
    if (boost::beast::iequals(field.name, policy.key_header)) key_fields.push_back(field.value);
  }
  if (core::key_origin(policy.key_source, !key_fields.empty()) == core::KeyOrigin::json_body) {
    // The exchange reads the key with the fingerprint's parse of the body. (A named value: see the
    // note on co_await arguments in idempotent_exchange.cpp.)
    std::optional<std::string> read_from_body;
    co_return co_await run_idempotent_exchange(services, routed.terms, policy, received, client_address,
                                               std::move(read_from_body), path, query, trace, rest);
  }
  auto parsed = core::parse_idempotency_key(key_fields, policy.max_key_length);
  if (const auto* error = std::get_if<core::KeyError>(&parsed)) {
    if (*error == core::KeyError::missing && policy.key == core::KeyRequirement::optional) {
      co_return co_await forward_plain(services, routed.terms, received, client_address, trace, replay_headers, rest);
    }
    trace.decision = *error == core::KeyError::missing ? decision::missing_key : decision::invalid_key;
    co_return problem_response(core::key_problem(*error, policy.key_header, policy.max_key_length), received.version,
                               services.config->problem_docs_url());
  }
  if (std::optional<std::string> rule =
          core::broken_key_rule(std::get<std::string>(parsed), policy.min_key_length, policy.key_format)) {
    trace.decision = decision::invalid_key;
    co_return problem_response(
        core::key_problem(core::KeyError::malformed, core::key_rule_detail(policy.key_header, *rule)), received.version,
        services.config->problem_docs_url());
  }
  std::optional<std::string> key = std::move(std::get<std::string>(parsed));
  co_return co_await run_idempotent_exchange(services, routed.terms, policy, received, client_address, std::move(key),
                                             path, query, trace, rest);
}

}  // namespace idem::http
