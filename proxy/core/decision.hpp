#pragma once
// The business decision: given what the claim returned, what the proxy does with the request.
#include <chrono>
#include <string_view>

#include "core/record.hpp"
#include "core/route.hpp"

namespace idem::core {

// The store's answer to a claim: either this request now owns a fresh in-flight record, or the
// record that already exists for (scope, key) and is not expired.
struct ClaimResult {
  bool claimed = false;
  Record existing;                           // meaningful when !claimed
  bool existing_under_legacy_scope = false;  // the record found is the claim's legacy_scope one
};

enum class Action {
  execute,               // we own the claim: forward upstream, then complete or release
  replay,                // same fingerprint, completed: send the stored response
  fingerprint_mismatch,  // 422: same key, different request
  in_flight,             // 409 + Retry-After: the first request is still running
  wait,                  // in_flight, on a route that holds duplicates (in_flight: wait): ask again later
  too_large_to_replay,   // 409: the original completed with a body too large to store
  outcome_unknown,       // 502: the original reached the upstream, its outcome is unknown
};
std::string_view action_name(Action action);

struct Decision {
  Action action = Action::execute;
  std::chrono::seconds retry_after{0};  // for in_flight: whole seconds left on the lease, at least 1
};

// The same decision for a record the claim returned and for a copy from a replay cache (a
// cached record is always finished, so a cache hit decides replay, mismatch or too_large).
Decision decide(const ClaimResult& claim, std::string_view fingerprint, const RoutePolicy& policy);
Decision decide(const Record& existing, std::string_view fingerprint, const RoutePolicy& policy);

// After the upstream answered: keep the response as the key's result, or release the key.
enum class Outcome {
  store,            // complete the record with the response
  store_too_large,  // complete as too_large (status only): retries get 409, never a re-execution
  release,          // delete the record: the upstream said "not processed, try later"
};
std::string_view outcome_name(Outcome outcome);

// `transient_header` is the raw value of the upstream's Idempotency-Transient header, or empty
// when absent. "true"/"?1" forces release, "false"/"?0" forces storing; anything else is ignored.
Outcome classify_response(int status, std::string_view transient_header, std::size_t body_size,
                          const RoutePolicy& policy);

}  // namespace idem::core
