#pragma once
// RFC 9457 problem details: every error response the proxy itself emits is built here, so the
// mapping from a situation to a status code lives in one place.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/decision.hpp"
#include "core/idempotency_key.hpp"
#include "core/upstream_failure.hpp"

namespace idem::core {

struct Problem {
  int status = 500;
  std::string slug;                                 // "key-malformed": names the type (problem_type)
  std::string title;                                // fixed per type
  std::string detail;                               // specific to this occurrence
  std::optional<std::chrono::seconds> retry_after;  // sent as Retry-After when set
};

// The problem's `type`: "urn:idemproxy:problem:<slug>", or "<docs_url>#<slug>" when the
// configuration names where the problem types are documented (problems.docs_url; the README has
// an anchor per slug), so a client can follow it.
std::string problem_type(const Problem& problem, std::string_view docs_url = {});
// The Link field value pointing at the problem's documentation, `<type>; rel="describedby"`,
// on a 400 or a 422 when docs_url is set (draft-ietf-httpapi-idempotency-key-header §2.7);
// nullopt otherwise.
std::optional<std::string> problem_link(const Problem& problem, std::string_view docs_url);

// application/problem+json body: {"type","title","status","detail"} with JSON string escaping.
std::string problem_json(const Problem& problem, std::string_view docs_url = {});

Problem key_problem(KeyError error, std::string_view header_name, std::size_t max_length);  // 400
Problem key_problem(KeyError error, std::string detail);                      // 400, e.g. a key read from the body
Problem fingerprint_mismatch_problem(std::string_view header_name);           // 422
Problem in_flight_problem(std::chrono::seconds retry_after);                  // 409
Problem too_large_to_replay_problem(int original_status, std::size_t limit);  // 409
Problem outcome_unknown_problem();                                            // 502
Problem store_unavailable_problem(std::chrono::seconds retry_after);          // 503
// The answer to an exchange with the upstream that failed (`failure` is not none): 502, 503 or 504.
Problem upstream_failure_problem(UpstreamFailure failure);
Problem upstream_unreachable_problem(std::string_view why);   // 502
Problem upstream_connections_busy_problem();                  // 503 + Retry-After
Problem upstream_timeout_problem();                           // 504
Problem upstream_bad_response_problem(std::string_view why);  // 502
// The TLS handshake with an https upstream failed (its certificate did not verify, or it refused
// ours): nothing was sent, the key is released. The reason is logged, not told to the client.
Problem upstream_tls_failed_problem();                                     // 502
Problem request_too_large_problem(std::size_t limit);                      // 413
Problem bad_request_problem(std::string_view why);                         // 400
Problem transfer_coding_not_implemented_problem(std::string_view coding);  // 501
Problem headers_too_large_problem(std::string_view why);                   // 431
Problem request_line_too_long_problem(std::size_t limit);                  // 414
Problem too_many_connections_problem();                                    // 503
// A request that offers to switch protocols where the proxy does not pass the offer on (a guarded
// route, a protocol the route's `upgrades` does not list): refused before anything reaches the
// upstream, as Envoy refuses an upgrade its route does not enable.
Problem upgrade_refused_problem(std::string detail);  // 403
Problem internal_problem(std::string_view why);       // 500
// The stored response exists but failed its integrity check (encrypted at rest, see
// store/encrypting_store.hpp): it is never replayed, and the request is not executed again.
Problem record_corrupt_problem();  // 500
// An operator asked to release a record whose request may still be executing (in flight, lease
// running): refused, with the time the lease has left as Retry-After.
Problem release_refused_in_flight_problem(std::chrono::seconds lease_left);  // 409

// The answer to every decision that neither executes nor replays (fingerprint_mismatch,
// in_flight and wait, too_large_to_replay, outcome_unknown) for the record it was made on.
Problem decision_problem(const Decision& decision, const Record& record, const RoutePolicy& policy);

}  // namespace idem::core
