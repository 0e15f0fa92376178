#include "core/problem.hpp"

#include <cassert>
#include <cstdio>
#include <utility>

namespace idem::core {
namespace {

constexpr std::string_view kTypePrefix = "urn:idemproxy:problem:";

Problem make_problem(int status, std::string_view slug, std::string_view title, std::string detail,
                     std::optional<std::chrono::seconds> retry_after = std::nullopt) {
  return Problem{status, std::string(slug), std::string(title), std::move(detail), retry_after};
}

// "<sentence>: <why>", or the sentence alone when there is no reason to add.
std::string with_reason(std::string_view sentence, std::string_view why) {
  std::string detail(sentence);
  if (!why.empty()) detail.append(": ").append(why);
  return detail;
}

std::string seconds_phrase(std::chrono::seconds duration) {
  const auto count = duration.count();
  return std::to_string(count) + (count == 1 ? " second" : " seconds");
}

// RFC 8259 §7: quote, backslash and control characters escaped; other bytes (UTF-8) as they are.
void append_json_string(std::string& out, std::string_view text) {
  out.push_back('"');
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[7];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
      out.append(escape);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

}  // namespace

std::string problem_type(const Problem& problem, std::string_view docs_url) {
  if (docs_url.empty()) return std::string(kTypePrefix).append(problem.slug);
  return std::string(docs_url).append("#").append(problem.slug);
}

std::optional<std::string> problem_link(const Problem& problem, std::string_view docs_url) {
  if (docs_url.empty() || (problem.status != 400 && problem.status != 422)) return std::nullopt;
  return "<" + problem_type(problem, docs_url) + ">; rel=\"describedby\"";
}

std::string problem_json(const Problem& problem, std::string_view docs_url) {
  std::string json = "{\"type\":";
  append_json_string(json, problem_type(problem, docs_url));
  json.append(",\"title\":");
  append_json_string(json, problem.title);
  json.append(",\"status\":").append(std::to_string(problem.status));
  json.append(",\"detail\":");
  append_json_string(json, problem.detail);
  json.push_back('}');
  return json;
}

Problem key_problem(KeyError error, std::string_view header_name, std::size_t max_length) {
  return key_problem(error, key_error_detail(error, header_name, max_length));
}

Problem key_problem(KeyError error, std::string detail) {
  switch (error) {
    case KeyError::missing: return make_problem(400, "key-missing", "Idempotency key missing", std::move(detail));
    case KeyError::empty: return make_problem(400, "key-empty", "Idempotency key empty", std::move(detail));
    case KeyError::too_long: return make_problem(400, "key-too-long", "Idempotency key too long", std::move(detail));
    case KeyError::malformed: return make_problem(400, "key-malformed", "Idempotency key malformed", std::move(detail));
    case KeyError::multiple: return make_problem(400, "key-multiple", "Multiple idempotency keys", std::move(detail));
  }
  return bad_request_problem(detail);
}

Problem fingerprint_mismatch_problem(std::string_view header_name) {
  return make_problem(422, "fingerprint-mismatch", "Idempotency key reused for a different request",
                      "this " + std::string(header_name) +
                          " value was already used for a different request (method, path, query, headers or "
                          "body); use a new key for a new request");
}

Problem in_flight_problem(std::chrono::seconds retry_after) {
  return make_problem(
      409, "request-in-flight", "Request in progress",
      "a request with this idempotency key is still being processed; retry in " + seconds_phrase(retry_after),
      retry_after);
}

Problem too_large_to_replay_problem(int original_status, std::size_t limit) {
  return make_problem(409, "response-too-large-to-replay", "Response too large to replay",
                      "the original request completed with status " + std::to_string(original_status) +
                          " but its response exceeded the " + std::to_string(limit) +
                          "-byte limit and cannot be replayed; it will not be executed again");
}

Problem release_refused_in_flight_problem(std::chrono::seconds lease_left) {
  return make_problem(409, "release-refused-in-flight", "Request may still be executing",
                      "the record is in flight and its lease runs for " + seconds_phrase(lease_left) +
                          " more: its request may be executing now, and releasing it would let a retry run it a "
                          "second time; once the lease lapses it can be released",
                      lease_left);
}

Problem outcome_unknown_problem() {
  return make_problem(502, "outcome-unknown", "Outcome unknown",
                      "the original request reached the upstream but no response came back; the outcome is "
                      "unknown and must be reconciled by an operator; it will not be executed again");
}

Problem store_unavailable_problem(std::chrono::seconds retry_after) {
  return make_problem(503, "store-unavailable", "Idempotency store unavailable",
                      "the idempotency store cannot be reached, so the request was not forwarded; retry in " +
                          seconds_phrase(retry_after),
                      retry_after);
}

Problem upstream_failure_problem(UpstreamFailure failure) {
  switch (failure) {
    case UpstreamFailure::connect_failed:
      return upstream_unreachable_problem("the upstream refused or did not accept the connection");
    case UpstreamFailure::pool_exhausted: return upstream_connections_busy_problem();
    case UpstreamFailure::tls_failed: return upstream_tls_failed_problem();
    case UpstreamFailure::timeout: return upstream_timeout_problem();
    case UpstreamFailure::connection_lost:
      return upstream_bad_response_problem("the upstream closed the connection without a complete response");
    case UpstreamFailure::bad_response:
      return upstream_bad_response_problem("the upstream sent a malformed HTTP response");
    case UpstreamFailure::switched_protocols:
      return upstream_bad_response_problem("the upstream switched protocols (101), which this request did not ask for");
    case UpstreamFailure::response_too_large:
      return upstream_bad_response_problem("the upstream response exceeded limits.max_response_body");
    case UpstreamFailure::none: break;
  }
  assert(false && "upstream_failure_problem: not a failure");
  return internal_problem("unexpected upstream state");
}

Problem upstream_unreachable_problem(std::string_view why) {
  return make_problem(502, "upstream-unreachable", "Upstream unreachable",
                      with_reason("the upstream service could not be reached", why));
}

Problem upstream_connections_busy_problem() {
  // The same type as unreachable (nothing reached the upstream), but a passing condition: 503.
  Problem problem = make_problem(
      503, "upstream-unreachable", "Upstream unreachable",
      with_reason("the upstream service could not be reached", "every upstream connection of this proxy is busy"));
  problem.retry_after = std::chrono::seconds(1);
  return problem;
}

Problem upstream_timeout_problem() {
  return make_problem(504, "upstream-timeout", "Upstream timeout", "the upstream service did not answer in time");
}

Problem upstream_bad_response_problem(std::string_view why) {
  return make_problem(502, "upstream-bad-response", "Bad upstream response",
                      with_reason("the upstream service sent an invalid response", why));
}

Problem upstream_tls_failed_problem() {
  return make_problem(502, "upstream-tls-failed", "Upstream TLS handshake failed",
                      "the proxy could not set up a verified TLS connection to the upstream service, so the "
                      "request was not sent; it is safe to retry");
}

Problem request_too_large_problem(std::size_t limit) {
  return make_problem(413, "request-too-large", "Request too large",
                      "the request body exceeds the " + std::to_string(limit) + "-byte limit");
}

Problem bad_request_problem(std::string_view why) {
  return make_problem(400, "bad-request", "Bad request", with_reason("the request is invalid", why));
}

Problem transfer_coding_not_implemented_problem(std::string_view coding) {
  return make_problem(501, "transfer-coding-not-implemented", "Transfer coding not implemented",
                      "transfer coding \"" + std::string(coding) + "\" is not implemented (only chunked is)");
}

Problem headers_too_large_problem(std::string_view why) {
  return make_problem(431, "headers-too-large", "Request header fields too large", std::string(why));
}

Problem request_line_too_long_problem(std::size_t limit) {
  return make_problem(414, "uri-too-long", "Request line too long",
                      "the request line exceeds limits.max_request_line (" + std::to_string(limit) + " bytes)");
}

Problem too_many_connections_problem() {
  return make_problem(503, "too-many-connections", "Too many connections",
                      "this proxy has reached limits.max_connections; retry shortly", std::chrono::seconds(1));
}

Problem upgrade_refused_problem(std::string detail) {
  return make_problem(403, "upgrade-refused", "Upgrade refused", std::move(detail));
}

Problem internal_problem(std::string_view why) {
  return make_problem(500, "internal", "Internal error", with_reason("the proxy failed to handle the request", why));
}

Problem record_corrupt_problem() {
  return make_problem(500, "record-corrupt", "Stored response corrupt",
                      "the stored response for this idempotency key failed its integrity check and cannot be "
                      "replayed; the original request was already executed and will not be executed again");
}

Problem decision_problem(const Decision& decision, const Record& record, const RoutePolicy& policy) {
  switch (decision.action) {
    case Action::fingerprint_mismatch: return fingerprint_mismatch_problem(policy.key_header);
    case Action::in_flight:
    case Action::wait: return in_flight_problem(decision.retry_after);
    case Action::too_large_to_replay:
      return too_large_to_replay_problem(record.response.status, policy.max_stored_body);
    case Action::outcome_unknown: return outcome_unknown_problem();
    case Action::execute:
    case Action::replay: break;
  }
  return internal_problem("no problem for this decision");
}

}  // namespace idem::core
