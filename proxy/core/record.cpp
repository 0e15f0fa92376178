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

}  // namespace idem::core
