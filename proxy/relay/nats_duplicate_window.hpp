#pragma once
// What a JetStream stream's duplicate window covers, judged against the relay's settings.
//
// JetStream remembers a Nats-Msg-Id for `duplicate_window` after it stored the message, no longer.
// A row published and not yet marked (the relay killed or stopped, Postgres unreachable, an ack
// lost) is published again once its lease lapses or its backoff ends and a relay can claim it; if
// that is more than a window after the first copy was stored, the stream stores a second copy
// (same Nats-Msg-Id, same event_id: consumers deduplicate on event_id).
//  - shorter than relay.lease + relay.backoff.max: even a relay that never stops re-publishes
//    later than that, so the relay refuses to start;
//  - shorter than kRecommendedDuplicateWindow: it covers only an outage (relay down, Postgres
//    unreachable) shorter than the window between a publish and its mark, so start-up and --check
//    warn, saying the figure.
#include <chrono>
#include <string>
#include <string_view>

namespace idem::relay {

inline constexpr std::chrono::hours kRecommendedDuplicateWindow{1};

enum class DuplicateWindowVerdict { refused, warned, enough };

struct DuplicateWindowCheck {
  DuplicateWindowVerdict verdict = DuplicateWindowVerdict::enough;
  std::string message;  // refused, warned: what the window covers and what to do; enough: a summary
};

// `required`: relay.lease + relay.backoff.max.
DuplicateWindowCheck check_duplicate_window(std::string_view stream, std::chrono::milliseconds window,
                                            std::chrono::milliseconds required);

// "4s", "5m", "2h 30m", "1500ms": for messages.
std::string describe_duration(std::chrono::milliseconds value);

}  // namespace idem::relay
