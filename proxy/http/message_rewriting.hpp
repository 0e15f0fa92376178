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

// The fields an upstream's head loses before a client sees it: hop-by-hop ones (Transfer-Encoding
// among them: read its codings first), Idempotency-Transient, Idempotency-Key-Expires and
// `replay_headers` (only the proxy says what is a replay, and when a key expires).
void strip_upstream_fields(beast_http::fields& head, const std::vector<std::string>& replay_headers);

// The framing of a head whose body is streamed to the client (http/streamed_forwarding.hpp), its
// upstream fields already stripped: `framing`'s Transfer-Encoding, Content-Length dropped where it
// must be (core/streamed_framing.hpp).
void frame_streamed_head(beast_http::fields& head, const core::StreamedFraming& framing);

// Whether a head's fields announce a body: a length other than 0, or a coding. (Asked only of a
// status that has no body, 204 or 304: an upstream that announces one anyway may send its bytes
// after we stopped reading, and its connection is not reused.)
bool announces_body(const beast_http::fields& fields);

// Every Transfer-Encoding line of a head, as one list ("gzip, chunked"); empty when none.
std::string transfer_codings(const beast_http::fields& fields);

// Whether the message leaves its connection open, reading every Connection line (Beast's
// keep_alive() reads only the first: `Connection: X-A` then `Connection: close` would stay open).
bool keeps_connection_open(const beast_http::response_header<>& response);

// Status, headers and body from the record, plus each of the route's replay headers set to
// `true`; the stored Idempotency-Key-Expires only while the route still announces it.
Response replay_response(const core::StoredResponse& stored, unsigned version, const core::RoutePolicy& policy);

// application/problem+json response, with Retry-After when the problem carries one; its type
// and Link point at `docs_url` when set (problems.docs_url, core/problem.hpp).
Response problem_response(const core::Problem& problem, unsigned version, std::string_view docs_url);

// The response's header fields as an ordered list (for storage).
core::HeaderList header_list(const Response& response);

}  // namespace idem::http
