#include "relay/nats_message_id.hpp"

#include "relay/event_fingerprint.hpp"

namespace idem::relay {

std::string nats_message_id(const OutboxRow& row) { return std::to_string(row.id) + ":" + event_fingerprint(row); }

std::string legacy_nats_message_id(const OutboxRow& row) { return std::to_string(row.id); }

bool may_have_legacy_copy(std::int64_t created_at_micros, std::int64_t started_micros, std::int64_t now_micros,
                          std::chrono::milliseconds window) {
  const std::int64_t window_micros = std::chrono::duration_cast<std::chrono::microseconds>(window).count();
  const std::int64_t skew_micros =
      std::chrono::duration_cast<std::chrono::microseconds>(kCreatedAtSkewAllowance).count();
  return now_micros - started_micros < window_micros && created_at_micros < started_micros + skew_micros;
}

bool earlier_copies_possible(std::int64_t last_stored_micros, std::int64_t started_micros,
                             std::chrono::milliseconds window) {
  const std::int64_t window_micros = std::chrono::duration_cast<std::chrono::microseconds>(window).count();
  return last_stored_micros > 0 && last_stored_micros > started_micros - window_micros;
}

}  // namespace idem::relay
