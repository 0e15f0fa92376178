#pragma once
// What a settle does to one row of a batch (relay/settle_decision.hpp decides it; the outbox
// source writes it, sql::kSettle). Plain data, std only.
#include <chrono>
#include <cstdint>
#include <string>

namespace idem::relay {

enum class Settlement {
  released,   // lease dropped, nothing else: not attempted, or not the row's fault (uncharged)
  published,  // marked published: the sink has it
  retry,      // charged one attempt, available again after `delay`
  parked,     // charged one attempt and parked: its aggregate's later rows wait behind it
};

struct RowSettlement {
  std::int64_t id = 0;
  std::int32_t lane = 0;  // the row's lane (002_lanes.sql), as the claim returned it
  Settlement outcome = Settlement::released;
  std::chrono::milliseconds delay{0};  // retry: available again after this long
  std::string error;                   // retry, parked: why (kept in last_error)
};

}  // namespace idem::relay
