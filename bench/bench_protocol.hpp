#pragma once
// The contract between idem-bench-upstream and idem-loadgen: what the upstream answers, how it is
// asked to count and to wait. One place, so the two tools cannot drift apart.
#include <chrono>
#include <string_view>

namespace idem::bench {

// The fixed body of every counted upstream response (direct, through nginx, through idemproxy).
inline constexpr std::string_view kUpstreamBody = R"({"ok":true,"id":12345})";

// GET on this path answers {"executions":N}: the requests the upstream has executed so far (the
// count requests themselves excluded). The loadgen reads it before and after a run.
inline constexpr std::string_view kCountPath = "/__count";

// Request header asking the upstream to wait this many milliseconds before answering (the storm
// sends it so its duplicates arrive while the first request is still in flight).
inline constexpr std::string_view kDelayHeader = "Bench-Delay-Ms";
inline constexpr std::chrono::milliseconds kMaxDelay{10'000};

// Response header idemproxy sets on a replayed response.
inline constexpr std::string_view kReplayHeader = "Idempotent-Replay";

}  // namespace idem::bench
