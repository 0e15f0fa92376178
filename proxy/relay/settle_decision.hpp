#pragma once
// The decision what one delivery does to its outbox row: (what the sink said, the row's attempts
// so far, max_attempts) -> published, charged and retried, parked, or released uncharged, and why.
// Pure: no I/O, no clock, no randomness (a retry's backoff delay is drawn by the caller). The relay
// loop applies it to every row of a batch (relay.cpp); tests/relay/settle_decision_test.cpp walks
// every case. As core/decision.hpp is for the proxy.
#include <string_view>

#include "relay/settlement.hpp"
#include "relay/sink.hpp"

namespace idem::relay {

enum class SettleReason {
  delivered,         // published: the sink took it
  duplicate,         // published: the sink already had it (a re-publish after a crash or lost reply)
  failed,            // retry: charged one attempt, available again after a backoff
  out_of_attempts,   // parked: this failure was its max_attempts-th
  refused,           // parked at once: the sink refused it for good (HTTP 4xx, too large)
  held,              // released, uncharged: not attempted (an earlier row of its aggregate did not
                     // go through, or the batch's lease was nearly over)
  sink_unavailable,  // released, uncharged: the sink could not be reached; the relay backs off
};
std::string_view settle_reason_name(SettleReason reason);

struct SettleDecision {
  Settlement settlement = Settlement::released;
  SettleReason reason = SettleReason::held;
  int attempts = 0;  // the row's attempts once settled (charged: one more than before)
};

// `attempts`: the row's failed publishes before this claim. `max_attempts` >= 1 (config checks it):
// the failure that brings a row to it parks the row.
SettleDecision decide_settlement(DeliveryOutcome outcome, int attempts, unsigned max_attempts);

}  // namespace idem::relay
