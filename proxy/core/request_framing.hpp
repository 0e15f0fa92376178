#pragma once
// The request validator: what RFC 9112 and RFC 9110 say a server must refuse in a request head,
// checked after the HTTP parser accepted it and before anything routes or forwards it. Each of
// these, let through, lets a client and the upstream disagree on where a request ends (request
// smuggling) or on which host it is for. Pure: the head's fields in, a problem or nothing out.
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/problem.hpp"

namespace idem::core {

struct RequestHead {
  std::string_view method;
  unsigned version = 11;                                              // 10 or 11
  std::vector<std::pair<std::string_view, std::string_view>> fields;  // as received, every line
};

// Nullopt when the head may be served; else the refusal (400, or 501 for a transfer coding the
// proxy does not implement), with a detail naming the rule. The connection is closed after it.
//   - Transfer-Encoding (§6.1): only in HTTP/1.1; only `chunked`, once, as the final coding
//     (anything else is 501); never with Content-Length (§6.3).
//   - Content-Length (§6.2, RFC 9110 §8.6): one field line, one value, digits only.
//   - Host (§3.2): never more than one, exactly one in HTTP/1.1, a syntactically valid authority.
//   - Field values (RFC 9110 §5.5): no control characters but HTAB.
//   - TRACE carries no content (RFC 9110 §9.3.8).
std::optional<Problem> request_framing_problem(const RequestHead& head);

}  // namespace idem::core
