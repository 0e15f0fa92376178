#include "relay/nats_duplicate_window.hpp"

namespace idem::relay {

std::string describe_duration(std::chrono::milliseconds value) {
  using namespace std::chrono;
  if (value.count() % 1000 != 0 || value < seconds(1)) return std::to_string(value.count()) + "ms";
  const auto total = duration_cast<seconds>(value).count();
  const auto hours = total / 3600;
  const auto minutes = total % 3600 / 60;
  const auto secs = total % 60;
  std::string text;
  const auto part = [&text](long long amount, const char* unit) {
    if (amount == 0) return;
    if (!text.empty()) text += " ";
    text += std::to_string(amount) + unit;
  };
  part(hours, "h");
  part(minutes, "m");
  part(secs, "s");
  return text;
}

DuplicateWindowCheck check_duplicate_window(std::string_view stream, std::chrono::milliseconds window,
                                            std::chrono::milliseconds required) {
  const std::string name = "stream \"" + std::string(stream) + "\"";
  if (window < required) {
    return {DuplicateWindowVerdict::refused,
            name + " deduplicates over " + std::to_string(window.count()) +
                " ms (duplicate_window), shorter than relay.lease + relay.backoff.max (" +
                std::to_string(required.count()) + " ms): a row published again after that long would be stored twice"};
  }
  if (window < kRecommendedDuplicateWindow) {
    return {DuplicateWindowVerdict::warned,
            name + " deduplicates over " + describe_duration(window) +
                " (duplicate_window): a relay stopped, or Postgres unreachable, for longer than " +
                describe_duration(window) +
                " between publishing an event and marking it stores the event twice (same Nats-Msg-Id and "
                "event_id; consumers deduplicate on event_id); give the stream a duplicate_window of hours (at least " +
                describe_duration(kRecommendedDuplicateWindow) + ")"};
  }
  return {DuplicateWindowVerdict::enough, name + " deduplicates over " + describe_duration(window) +
                                              ": covers an outage of up to that long between a publish and its mark"};
}

}  // namespace idem::relay
