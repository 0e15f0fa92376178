#pragma once
// How an exchange with the upstream can fail, and what each failure says about whether the
// upstream may have executed the request. Pure names; the pool (http/upstream_pool) reports them,
// failure_policy decides the record's fate, problem.hpp maps them to the client's answer.
#include <string_view>

namespace idem::core {

enum class UpstreamFailure {
  none,
  // Nothing reached the upstream: safe to release the key and let the client retry.
  connect_failed,
  pool_exhausted,
  // The TLS handshake failed (certificate not verified, name mismatch, our client certificate
  // refused, no common version): nothing reached the upstream's application.
  tls_failed,
  // The request was (at least partly) written: the upstream may have executed it.
  timeout,
  connection_lost,
  bad_response,
  switched_protocols,  // 101, which no request of ours asks for: the connection is not HTTP any more
  response_too_large,  // the status line and headers arrived; the body exceeded max_response_body
};
std::string_view upstream_failure_name(UpstreamFailure failure);

// What a failure means for the record: the three cases after_upstream_failure() decides on.
enum class UpstreamFailureKind {
  nothing_sent,        // connect refused, TLS failed, no connection free: the upstream never saw it
  response_too_large,  // the upstream answered, with a body beyond what the proxy handles
  outcome_unknown,     // the request (at least partly) went out and no complete answer came back
};
// `failure` must not be none.
UpstreamFailureKind upstream_failure_kind(UpstreamFailure failure);

}  // namespace idem::core
