#include "core/record.hpp"

#include <string_view>

namespace idem::core {

std::string_view record_state_name(RecordState state) {
  switch (state) {
    case RecordState::in_flight: return "in_flight";
    case RecordState::completed: return "completed";
    case RecordState::too_large: return "too_large";
    case RecordState::unknown: return "unknown";
  }
  return "invalid";
}

bool lease_lapsed(RecordState state, std::chrono::milliseconds lease_remaining) {
  return state == RecordState::in_flight && lease_remaining <= std::chrono::milliseconds::zero();
}

RecordState observed_state(RecordState state, std::chrono::milliseconds lease_remaining) {
  return lease_lapsed(state, lease_remaining) ? RecordState::unknown : state;
}

}  // namespace idem::core
