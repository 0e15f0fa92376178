#pragma once
// Header rewriting at the proxy's two edges, and the responses the proxy builds itself.
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.hpp"
#include "core/record.hpp"
#include "core/route.hpp"
#include "core/streamed_framing.hpp"
#include "http/message.hpp"

namespace idem::http {

// The upstream's response as the client sees it: hop-by-hop fields, Idempotency-Transient and
// `replay_headers` (the route's; only the proxy says what is a replay) removed, framing
// recomputed (Content-Length) unless it answers a HEAD request.
void prepare_client_response(Response& response, bool head_request, const std::vector<std::string>& replay_headers);

// The head of a response streamed to the client (http/streamed_forwarding.hpp): the same fields
// removed as by prepare_client_response, every Transfer-Encoding line replaced by `framing`'s,
// Content-Length dropped where it must be (core/streamed_framing.hpp).
void prepare_streamed_head(beast_http::response_header<>& head, const core::StreamedFraming& framing,
                           const std::vector<std::string>& replay_headers);

// Every Transfer-Encoding line of a head, as one list ("gzip, chunked"); empty when none.
std::string transfer_codings(const beast_http::fields& fields);

// Whether the message leaves its connection open, reading every Connection line (Beast's
// keep_alive() reads only the first: `Connection: X-A` then `Connection: close` would stay open).
bool keeps_connection_open(const beast_http::response_header<>& response);

// Status, headers and body from the record, plus each of the route's replay headers set to
// `true`; the stored Idempotency-Key-Expires only while the route still announces it.
Response replay_response(const core::StoredResponse& stored, unsigned version, const core::RoutePolicy& policy);

// application/problem+json response, with Retry-After when the problem carries one.
Response problem_response(const core::Problem& problem, unsigned version);

// The response's header fields as an ordered list (for storage).
core::HeaderList header_list(const Response& response);

}  // namespace idem::http
