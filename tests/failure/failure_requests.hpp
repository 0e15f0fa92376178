#pragma once
// Requests the failure tests send and what they read back from the answers.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support/http_client.hpp"

namespace idem::test::failure {

inline constexpr std::string_view kPaymentBody = R"({"amount":1250,"currency":"EUR","to":"acct-42"})";
inline constexpr std::string_view kProblemPrefix = "urn:idemproxy:problem:";

// POST path with Idempotency-Key: key and a JSON body. Steering headers for idem-test-upstream
// (delay, hang) are not part of the fingerprint, so a retry may leave them out.
HttpRequest keyed_post(std::string_view path, std::string_view key, std::string_view body = kPaymentBody);

// The problem type's slug ("outcome-unknown" for urn:idemproxy:problem:outcome-unknown); empty
// when the response is not an idemproxy problem.
std::string problem_slug(const HttpResponse& response);

bool is_replay(const HttpResponse& response);
bool is_unchecked(const HttpResponse& response);  // Idempotency-Status: unchecked
// Retry-After as whole seconds; nullopt when absent or not a number.
std::optional<long> retry_after_seconds(const HttpResponse& response);
// The upstream's execution number (X-Execution); 0 when the upstream did not answer this.
std::uint64_t execution_of(const HttpResponse& response);

// Sends request until the answer is neither 409 request-in-flight (the first execution has not
// settled) nor 503 store-unavailable (the store is still reconnecting), or until timeout passes;
// returns the last answer.
HttpResponse send_until_settled(std::uint16_t port, const HttpRequest& request, std::chrono::milliseconds timeout);

// Sends request until it is answered with something other than 503 (the store, or the pool of the
// worker the connection lands on, still reconnecting or failing over), or until deadline passes;
// returns the last answer.
HttpResponse send_while_refused(std::uint16_t port, const HttpRequest& request,
                                std::chrono::steady_clock::time_point deadline);

// Milliseconds since start, for messages.
long long elapsed_ms(std::chrono::steady_clock::time_point start);

}  // namespace idem::test::failure
