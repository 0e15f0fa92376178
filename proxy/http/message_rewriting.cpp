#include "http/message_rewriting.hpp"

#include <boost/beast/core/string.hpp>
#include <algorithm>
#include <array>
#include <charconv>
#include <iterator>
#include <string>

#include "core/stored_headers.hpp"
#include "wire/http_head.hpp"

namespace idem::http {
namespace {

// Beast's lookups by name (count, operator[], erase(name), set) each walk a case-insensitive tree
// of names: several of them cost more than a whole pass over a message's few fields. So the
// rewriting below walks the field list, comparing the field enum where Beast knows the name.

bool named(const Request::value_type& field, std::string_view name) {
  return boost::beast::iequals(field.name_string(), name);
}

// Erases every field that is hop-by-hop for this message (RFC 9110 §7.6.1), including the fields
// any Connection line names, and every other field `also_erase` picks (in the list's order).
template <class Message, class AlsoErase>
void erase_fields(Message& message, AlsoErase also_erase) {
  const std::string connection = wire::connection_list(message);
  for (auto field = message.begin(); field != message.end();) {
    const bool doomed = core::is_hop_by_hop(field->name_string(), connection) || also_erase(*field);
    field = doomed ? message.erase(field) : std::next(field);
  }
}

// Content-Length as prepare_payload() sets it for a body of known size when there is no transfer
// coding: every Content-Length line replaced by one, last, with the body's length. A message with a
// transfer coding goes to prepare_payload() itself.
template <class Message>
void set_length_last(Message& message) {
  for (auto field = message.begin(); field != message.end();) {
    if (field->name() == beast_http::field::transfer_encoding) {
      message.prepare_payload();
      return;
    }
    field = field->name() == beast_http::field::content_length ? message.erase(field) : std::next(field);
  }
  std::array<char, 24> digits{};
  const auto [end, error] = std::to_chars(digits.data(), digits.data() + digits.size(), message.body().size());
  (void)error;  // 24 characters hold any size_t
  message.insert(beast_http::field::content_length,
                 boost::beast::string_view(digits.data(), static_cast<std::size_t>(end - digits.data())));
}

}  // namespace

bool keeps_connection_open(const beast_http::response_header<>& response) {
  return core::keeps_connection_open(response.version(), wire::connection_list(response));
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
  set_length_last(response);
}

}  // namespace

void strip_upstream_fields(beast_http::fields& head, const std::vector<std::string>& replay_headers) {
  erase_fields(head, [&](const Response::value_type& field) {
    // Only the proxy says whether an answer is a replay: an upstream's own header never reaches
    // the client on a first execution. Nor when the key expires: that is the record's, which the
    // proxy keeps (core/stored_headers.hpp).
    if (named(field, "Idempotency-Transient") || named(field, core::kKeyExpiresHeader)) return true;
    return std::any_of(replay_headers.begin(), replay_headers.end(),
                       [&](const std::string& name) { return named(field, name); });
  });
}

void prepare_client_response(Response& response, bool head_request, const std::vector<std::string>& replay_headers) {
  strip_upstream_fields(response, replay_headers);
  frame_for_client(response, head_request);
}

void frame_streamed_head(beast_http::fields& head, const core::StreamedFraming& framing) {
  if (framing.drop_content_length) head.erase(beast_http::field::content_length);
  if (!framing.transfer_encoding.empty()) head.insert(beast_http::field::transfer_encoding, framing.transfer_encoding);
}

bool announces_body(const beast_http::fields& fields) {
  for (const auto& field : fields) {
    if (field.name() == beast_http::field::transfer_encoding) return true;
    if (field.name() == beast_http::field::content_length && field.value() != "0") return true;
  }
  return false;
}

std::string transfer_codings(const beast_http::fields& fields) {
  std::string joined;
  for (const auto& field : fields) {
    if (field.name() != beast_http::field::transfer_encoding || field.value().empty()) continue;
    if (!joined.empty()) joined += ", ";
    joined.append(field.value());
  }
  return joined;
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

Response problem_response(const core::Problem& problem, unsigned version, std::string_view docs_url) {
  Response response{static_cast<beast_http::status>(problem.status), version};
  response.set(beast_http::field::content_type, "application/problem+json");
  if (problem.retry_after) response.set(beast_http::field::retry_after, std::to_string(problem.retry_after->count()));
  if (std::optional<std::string> link = core::problem_link(problem, docs_url)) {
    response.set(beast_http::field::link, *link);
  }
  response.body() = core::problem_json(problem, docs_url);
  response.prepare_payload();
  return response;
}

core::HeaderList header_list(const Response& response) {
  core::HeaderList headers;
  for (const auto& field : response) headers.emplace_back(field.name_string(), field.value());
  return headers;
}

}  // namespace idem::http
