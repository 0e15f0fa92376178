#pragma once
// How a response streamed from the upstream is framed for the client (RFC 9112 §6, RFC 9110
// §8.6): the body goes on as it arrives, so its framing is decided from the head alone. A length
// stays the length; a chunked body is passed on chunk by chunk, its transfer codings named as the
// upstream named them (`gzip, chunked` stays so: stripping a coding would hand the client coded
// bytes it reads as plain); a body ended by the close stays so, and the client connection ends
// with it. An HTTP/1.0 client cannot receive a transfer coding: a chunked body reaches it ended
// by the close; any other coding is refused (502) rather than stripped.
#include <optional>
#include <string>
#include <string_view>

#include "core/problem.hpp"

namespace idem::core {

// The upstream response's framing, as its parser read the head.
struct UpstreamFraming {
  bool has_length = false;            // a Content-Length (never beside a coding: wire::read_response_head)
  bool chunked = false;               // the final transfer coding is chunked
  std::string_view transfer_codings;  // every Transfer-Encoding line joined ("gzip, chunked"); empty: none
};

enum class StreamedBody {
  none,         // HEAD, 204, 304: no body whatever the fields say
  length,       // Content-Length: the bytes as they come, that many
  chunked,      // chunk by chunk, the last chunk once the upstream's came
  until_close,  // the bytes as they come, until the upstream closes; then the client connection ends
};

struct StreamedFraming {
  StreamedBody body = StreamedBody::none;
  // The Transfer-Encoding field the client gets (every upstream line is dropped first: the field
  // is hop-by-hop); empty: none.
  std::string transfer_encoding;
  bool drop_content_length = false;  // 204: RFC 9110 §8.6 (a 304's or a HEAD answer's describes the representation)
  bool close_after = false;          // the client connection ends with this response
  std::optional<Problem> refusal;    // set: nothing is passed on, the client gets this 502
};

// Whether a Transfer-Encoding list names a coding other than chunked ("gzip, chunked", "br"):
// such a body is coded, and only a client told so can read it.
bool names_other_codings(std::string_view codings);

// `status` of the final response; `head_request`: the request was HEAD; `client_version` 10 or 11.
StreamedFraming streamed_framing(unsigned status, bool head_request, const UpstreamFraming& upstream,
                                 unsigned client_version);

}  // namespace idem::core
