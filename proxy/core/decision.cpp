#include "core/decision.hpp"

#include <algorithm>

#include "core/ascii.hpp"

namespace idem::core {
namespace {

// The upstream's explicit verdict through Idempotency-Transient, if it gave a recognizable one.
// Both the plain words and the Structured Field booleans (?1 / ?0) are accepted.
enum class TransientVerdict { none, transient, final };

TransientVerdict parse_transient_header(std::string_view raw) {
  const std::string_view value = ascii::trim_ows(raw);
  if (ascii::iequals(value, "true") || value == "?1") return TransientVerdict::transient;
  if (ascii::iequals(value, "false") || value == "?0") return TransientVerdict::final;
  return TransientVerdict::none;
}

bool is_release_status(int status, const RoutePolicy& policy) {
  return std::find(policy.release_statuses.begin(), policy.release_statuses.end(), status) !=
         policy.release_statuses.end();
}

// The upstream's explicit verdict wins over the route's status list.
bool should_release(int status, std::string_view transient_header, const RoutePolicy& policy) {
  switch (parse_transient_header(transient_header)) {
    case TransientVerdict::transient: return true;
    case TransientVerdict::final: return false;
    case TransientVerdict::none: break;
  }
  return is_release_status(status, policy);
}

}  // namespace

std::string_view action_name(Action action) {
  switch (action) {
    case Action::execute: return "execute";
    case Action::replay: return "replay";
    case Action::fingerprint_mismatch: return "fingerprint_mismatch";
    case Action::in_flight: return "in_flight";
    case Action::wait: return "wait";
    case Action::too_large_to_replay: return "too_large_to_replay";
    case Action::outcome_unknown: return "outcome_unknown";
  }
  return "invalid";
}

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::store: return "store";
    case Outcome::store_too_large: return "store_too_large";
    case Outcome::release: return "release";
  }
  return "invalid";
}

namespace {

// A duplicate of a request still running: rejected with 409, or held, as the route says.
Decision duplicate_in_flight(std::chrono::seconds retry_after, const RoutePolicy& policy) {
  switch (policy.in_flight) {
    case InFlightPolicy::reject: return {Action::in_flight, retry_after};
    case InFlightPolicy::wait: return {Action::wait, retry_after};
  }
  return {Action::in_flight, retry_after};
}

}  // namespace

Decision decide(const ClaimResult& claim, std::string_view fingerprint, const RoutePolicy& policy) {
  if (claim.claimed) return {Action::execute};
  return decide(claim.existing, fingerprint, policy);
}

Decision decide(const Record& record, std::string_view fingerprint, const RoutePolicy& policy) {
  // A different request under the same key is the client's mistake whatever the first one's state.
  if (record.fingerprint != fingerprint) return {Action::fingerprint_mismatch};

  switch (record.state) {
    case RecordState::completed: return {Action::replay};
    case RecordState::too_large: return {Action::too_large_to_replay};
    case RecordState::unknown: return {Action::outcome_unknown};
    case RecordState::in_flight: {
      if (!lease_lapsed(record.state, record.lease_remaining)) {
        const auto left = std::chrono::ceil<std::chrono::seconds>(record.lease_remaining);
        return duplicate_in_flight(std::max(left, std::chrono::seconds(1)), policy);
      }
      // The lease lapsed: the first execution may or may not have reached the upstream.
      switch (policy.unknown_outcome) {
        case UnknownOutcome::lock: return {Action::outcome_unknown};
        // The store hands a lapsed lease to the next claim, so a prompt retry executes.
        case UnknownOutcome::retry: return duplicate_in_flight(std::chrono::seconds(1), policy);
      }
      break;
    }
  }
  return {Action::outcome_unknown};  // unreachable with a valid state; never re-execute
}

Outcome classify_response(int status, std::string_view transient_header, std::size_t body_size,
                          const RoutePolicy& policy) {
  if (should_release(status, transient_header, policy)) return Outcome::release;
  return body_size > policy.max_stored_body ? Outcome::store_too_large : Outcome::store;
}

}  // namespace idem::core
