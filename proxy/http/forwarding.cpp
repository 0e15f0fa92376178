#include "http/forwarding.hpp"

#include <string>
#include <vector>

#include "core/stored_headers.hpp"

namespace idem::http {
namespace {

// Removes every field that is hop-by-hop for this message (RFC 9110 §7.6.1), including the
// fields the Connection header names.
template <class Message>
void strip_hop_by_hop(Message& message) {
  const std::string connection{message[beast_http::field::connection]};
  std::vector<std::string> doomed;
  for (const auto& field : message) {
    if (core::is_hop_by_hop(field.name_string(), connection)) doomed.emplace_back(field.name_string());
  }
  for (const auto& name : doomed) message.erase(name);
}

}  // namespace

void prepare_upstream_request(Request& request, std::string_view client_address) {
  // The connection layer set X-Forwarded-Proto (it alone knows the transport); a client's
  // Connection header naming it must not take it away.
  const std::string proto{request["X-Forwarded-Proto"]};
  strip_hop_by_hop(request);
  if (!proto.empty()) request.set("X-Forwarded-Proto", proto);
  request.erase(beast_http::field::expect);  // the proxy has read the whole body already
  const auto existing = request["X-Forwarded-For"];
  if (existing.empty()) {
    request.set("X-Forwarded-For", client_address);
  } else {
    std::string chained{existing};
    chained += ", ";
    chained += client_address;
    request.set("X-Forwarded-For", chained);
  }
  request.keep_alive(true);
  request.prepare_payload();
}

void prepare_client_response(Response& response, bool head_request) {
  strip_hop_by_hop(response);
  response.erase("Idempotency-Transient");
  if (!head_request) response.prepare_payload();
}

Response replay_response(const core::StoredResponse& stored, unsigned version) {
  Response response{static_cast<beast_http::status>(stored.status), version};
  for (const auto& [name, value] : stored.headers) response.insert(name, value);
  response.set("Idempotent-Replay", "true");
  response.body() = stored.body;
  response.prepare_payload();
  return response;
}

Response problem_response(const core::Problem& problem, unsigned version) {
  Response response{static_cast<beast_http::status>(problem.status), version};
  response.set(beast_http::field::content_type, "application/problem+json");
  if (problem.retry_after) response.set(beast_http::field::retry_after, std::to_string(problem.retry_after->count()));
  response.body() = core::problem_json(problem);
  response.prepare_payload();
  return response;
}

core::HeaderList header_list(const Response& response) {
  core::HeaderList headers;
  for (const auto& field : response) headers.emplace_back(field.name_string(), field.value());
  return headers;
}

}  // namespace idem::http
