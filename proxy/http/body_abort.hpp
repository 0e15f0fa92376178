#pragma once
// Which side cut a streamed body short, and how: what idemproxy_bodies_aborted_total counts and
// the access log's `aborted_by` names. Decided from how a body pump ended (wire/body_pump.hpp),
// knowing which side its source and its sink were.
#include <cstdint>
#include <string_view>

namespace idem::wire {
enum class PumpEnd;
}

namespace idem::http {

enum class AbortSide : std::uint8_t {
  none,      // every body went whole (or the exchange had none to move)
  client,    // the client closed or reset its connection, stopped reading, or went silent
  upstream,  // the upstream closed or reset its connection, broke the body's framing, or went silent
};
enum class AbortCause : std::uint8_t {
  failed,   // a close, a reset, bytes that do not parse
  timeout,  // a silence past its deadline (limits.body_timeout / write_timeout, upstream.timeout)
};
struct BodyAbort {
  AbortSide side = AbortSide::none;
  AbortCause cause = AbortCause::failed;
  friend bool operator==(const BodyAbort&, const BodyAbort&) = default;
};

// The request body's pump, from the client to the upstream, ended with `end` (`timed_out`: its
// error was a passed deadline). A body the client framed wrongly (malformed) is no abort: it is
// refused (400, 413) and counted as such.
BodyAbort request_body_abort(wire::PumpEnd end, bool timed_out);
// The answer body's pump, from the upstream to the client. `client_gone`: the client's socket was
// seen closing while the upstream was awaited (the proxy then closed the upstream connection
// itself, which is how that read failed).
BodyAbort answer_body_abort(wire::PumpEnd end, bool timed_out, bool client_gone);

// Label values: "client", "upstream" ("" for none); "failed", "timeout".
std::string_view abort_side_name(AbortSide side);
std::string_view abort_cause_name(AbortCause cause);

}  // namespace idem::http
