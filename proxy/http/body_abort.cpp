#include "http/body_abort.hpp"

#include "wire/body_pump.hpp"

namespace idem::http {
namespace {

BodyAbort by(AbortSide side, bool timed_out) { return {side, timed_out ? AbortCause::timeout : AbortCause::failed}; }

}  // namespace

BodyAbort request_body_abort(wire::PumpEnd end, bool timed_out) {
  switch (end) {
    case wire::PumpEnd::complete:
    case wire::PumpEnd::malformed: return {};
    case wire::PumpEnd::source_failed: return by(AbortSide::client, timed_out);
    case wire::PumpEnd::sink_failed: return by(AbortSide::upstream, timed_out);
  }
  return {};
}

BodyAbort answer_body_abort(wire::PumpEnd end, bool timed_out, bool client_gone) {
  switch (end) {
    case wire::PumpEnd::complete: return {};
    case wire::PumpEnd::source_failed:
    case wire::PumpEnd::malformed:
      return client_gone ? by(AbortSide::client, false) : by(AbortSide::upstream, timed_out);
    case wire::PumpEnd::sink_failed: return by(AbortSide::client, timed_out);
  }
  return {};
}

std::string_view abort_side_name(AbortSide side) {
  switch (side) {
    case AbortSide::none: return "";
    case AbortSide::client: return "client";
    case AbortSide::upstream: return "upstream";
  }
  return "";
}

std::string_view abort_cause_name(AbortCause cause) { return cause == AbortCause::timeout ? "timeout" : "failed"; }

}  // namespace idem::http
