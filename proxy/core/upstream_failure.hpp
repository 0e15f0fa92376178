#pragma once
// How an exchange with the upstream can fail, and what each failure says about whether the
// upstream may have executed the request. Pure names; the pool (http/upstream_pool) reports them,
// failure_policy decides the record's fate, problem.hpp maps them to the client's answer.
#include <cstddef>
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

// A request failed on a keep-alive connection the pool reused: what it knows of that attempt.
struct ReusedConnectionAttempt {
  bool connection_gone = false;   // the peer closed or reset it (not a deadline, not garbage)
  std::size_t bytes_written = 0;  // of this request, taken by the connection before it failed
  std::size_t bytes_read = 0;     // of an answer
  bool safe_method = false;       // GET, HEAD, OPTIONS
};
// Whether the request may be sent again on a fresh connection: only when the upstream cannot have
// acted on it. That is when not one byte of it was written (the peer had closed the idle
// connection before we wrote), whatever the method. Once any byte went out, even the head alone,
// an upstream may have run it: one that answers without reading the body and closes (Go's
// net/http does past 256 KB unread) fails our write part-way through a request it executed, so
// the outcome is unknown. A safe method may also go again when no byte of an answer came.
bool may_send_again(const ReusedConnectionAttempt& attempt);

}  // namespace idem::core
