#include "core/upstream_failure.hpp"

#include <cassert>

namespace idem::core {

std::string_view upstream_failure_name(UpstreamFailure failure) {
  switch (failure) {
    case UpstreamFailure::none: return "none";
    case UpstreamFailure::connect_failed: return "connect_failed";
    case UpstreamFailure::pool_exhausted: return "pool_exhausted";
    case UpstreamFailure::tls_failed: return "tls_failed";
    case UpstreamFailure::timeout: return "timeout";
    case UpstreamFailure::connection_lost: return "connection_lost";
    case UpstreamFailure::bad_response: return "bad_response";
    case UpstreamFailure::switched_protocols: return "switched_protocols";
    case UpstreamFailure::response_too_large: return "response_too_large";
  }
  return "unknown";
}

UpstreamFailureKind upstream_failure_kind(UpstreamFailure failure) {
  switch (failure) {
    case UpstreamFailure::connect_failed:
    case UpstreamFailure::pool_exhausted:
    case UpstreamFailure::tls_failed: return UpstreamFailureKind::nothing_sent;
    case UpstreamFailure::response_too_large: return UpstreamFailureKind::response_too_large;
    case UpstreamFailure::timeout:
    case UpstreamFailure::connection_lost:
    case UpstreamFailure::bad_response:
    case UpstreamFailure::switched_protocols: return UpstreamFailureKind::outcome_unknown;
    case UpstreamFailure::none: break;
  }
  assert(false && "upstream_failure_kind: not a failure");
  return UpstreamFailureKind::outcome_unknown;
}

bool may_send_again(const ReusedConnectionAttempt& attempt) {
  if (!attempt.connection_gone) return false;
  return attempt.bytes_written == 0 || (attempt.safe_method && attempt.bytes_read == 0);
}

}  // namespace idem::core
