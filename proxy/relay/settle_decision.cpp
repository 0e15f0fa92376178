#include "relay/settle_decision.hpp"

namespace idem::relay {

std::string_view settle_reason_name(SettleReason reason) {
  switch (reason) {
    case SettleReason::delivered: return "delivered";
    case SettleReason::duplicate: return "duplicate";
    case SettleReason::failed: return "failed";
    case SettleReason::out_of_attempts: return "max_attempts";
    case SettleReason::refused: return "refused_by_sink";
    case SettleReason::held: return "held";
    case SettleReason::sink_unavailable: return "sink_unavailable";
  }
  return "unknown";
}

SettleDecision decide_settlement(DeliveryOutcome outcome, int attempts, unsigned max_attempts) {
  switch (outcome) {
    case DeliveryOutcome::delivered: return {Settlement::published, SettleReason::delivered, attempts};
    case DeliveryOutcome::duplicate: return {Settlement::published, SettleReason::duplicate, attempts};
    case DeliveryOutcome::retry: {
      const int charged = attempts + 1;
      if (charged >= static_cast<int>(max_attempts))
        return {Settlement::parked, SettleReason::out_of_attempts, charged};
      return {Settlement::retry, SettleReason::failed, charged};
    }
    case DeliveryOutcome::poison: return {Settlement::parked, SettleReason::refused, attempts + 1};
    case DeliveryOutcome::held: return {Settlement::released, SettleReason::held, attempts};
    case DeliveryOutcome::unavailable: return {Settlement::released, SettleReason::sink_unavailable, attempts};
  }
  return {Settlement::released, SettleReason::held, attempts};
}

}  // namespace idem::relay
