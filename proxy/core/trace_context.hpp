#pragma once
// W3C Trace Context (https://www.w3.org/TR/trace-context/): the checks both binaries apply before
// they pass a trace on. idemrelay copies an outbox row's traceparent/tracestate to the stream entry
// and the webhook only when they pass; idemproxy logs a request's traceparent (and forwards the
// header untouched either way, as any end-to-end header).
#include <string_view>

namespace idem::core {

// "version-traceid-parentid-flags": 2, 32 and 16 lowercase hex digits, not all zeros, and 2 hex
// flags. Version ff is invalid; version 00 is exactly 55 characters; a later version may carry
// more after a '-' (read as 00, as the spec asks of a parser that knows only 00).
bool is_valid_traceparent(std::string_view value);

// At most 512 characters of printable ASCII (no control characters: it becomes a header line
// and a log field), not blank. The list-member grammar is the tracer's to enforce.
bool is_valid_tracestate(std::string_view value);

}  // namespace idem::core
