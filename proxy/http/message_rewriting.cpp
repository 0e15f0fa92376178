#include "http/message_rewriting.hpp"

#include <string>
#include <vector>

#include "core/stored_headers.hpp"

namespace idem::http {
namespace {

// Every line of a field, as one comma-separated list (RFC 9110 §5.3: several lines of a list
// field are one field; a proxy that reads only the first drops the rest).
template <class Message>
std::string joined_field(const Message& message, std::string_view name) {
  std::string joined;
  const auto [first, last] = message.equal_range(name);
  for (auto line = first; line != last; ++line) {
    if (line->value().empty()) continue;
    if (!joined.empty()) joined += ", ";
    joined.append(line->value());
  }
  return joined;
}

// Removes every field that is hop-by-hop for this message (RFC 9110 §7.6.1), including the
// fields any Connection line names.
template <class Message>
void strip_hop_by_hop(Message& message) {
  const std::string connection = joined_field(message, "Connection");
  std::vector<std::string> doomed;
  for (const auto& field : message) {
    if (core::is_hop_by_hop(field.name_string(), connection)) doomed.emplace_back(field.name_string());
  }
  for (const auto& name : doomed) message.erase(name);
}

}  // namespace

bool keeps_connection_open(const Request& request) {
  return core::keeps_connection_open(request.version(), joined_field(request, "Connection"));
}

bool keeps_connection_open(const Response& response) {
  return core::keeps_connection_open(response.version(), joined_field(response, "Connection"));
}

void prepare_upstream_request(Request& request, std::string_view client_address) {
  // The connection layer set X-Forwarded-Proto (it alone knows the transport); a client's
  // Connection header naming it must not take it away.
  const std::string proto{request["X-Forwarded-Proto"]};
  strip_hop_by_hop(request);
  if (!proto.empty()) request.set("X-Forwarded-Proto", proto);
  request.erase(beast_http::field::expect);  // the proxy has read the whole body already
  // Every X-Forwarded-For line the client (or a proxy before us, HAProxy adds a line) sent,
  // then this hop.
  std::string chained = joined_field(request, "X-Forwarded-For");
  if (!chained.empty()) chained += ", ";
  chained += client_address;
  request.set("X-Forwarded-For", chained);
  request.keep_alive(true);
  request.prepare_payload();
}

namespace {

// Content-Length for the client, RFC 9110 §8.6: none on 1xx and 204; a 304's (or a HEAD
// answer's) is the upstream's own, describing the representation, and is kept; otherwise the
// length of the body sent.
void frame_for_client(Response& response, bool head_request) {
  const unsigned status = response.result_int();
  if (status == 204 || status / 100 == 1) {
    response.erase(beast_http::field::content_length);
    response.erase(beast_http::field::transfer_encoding);
    return;
  }
  if (status == 304 || head_request) return;
  response.prepare_payload();
}

}  // namespace

void prepare_client_response(Response& response, bool head_request, const std::vector<std::string>& replay_headers) {
  strip_hop_by_hop(response);
  response.erase("Idempotency-Transient");
  // Only the proxy says whether an answer is a replay: an upstream's own header never reaches
  // the client on a first execution.
  for (const std::string& name : replay_headers) response.erase(name);
  // Nor when the key expires: that is the record's, which the proxy keeps (core/stored_headers.hpp).
  response.erase(core::kKeyExpiresHeader);
  frame_for_client(response, head_request);
}

Response replay_response(const core::StoredResponse& stored, unsigned version, const core::RoutePolicy& policy) {
  Response response{static_cast<beast_http::status>(stored.status), version};
  for (const auto& [name, value] : stored.headers) response.insert(name, value);
  // Stored by the first execution when the route announced it then; a reload may have turned it off.
  if (!policy.key_expires_header) response.erase(core::kKeyExpiresHeader);
  for (const std::string& name : policy.replay_headers) response.set(name, "true");
  response.body() = stored.body;
  frame_for_client(response, false);
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
