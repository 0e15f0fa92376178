#pragma once
// The contract between idem-bench-upstream and idem-loadgen: what the upstream answers, how it is
// asked to count and to wait. One place, so the two tools cannot drift apart.
#include <chrono>
#include <cstddef>
#include <string>
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

// Request header asking the upstream for a larger body of exactly this many bytes (padded_body):
// the memory scenario fills the proxy's replay cache with it.
inline constexpr std::string_view kBodyBytesHeader = "Bench-Body-Bytes";
inline constexpr std::size_t kMaxBodyBytes = 1024 * 1024;

// The body of `bytes` bytes the upstream answers to Bench-Body-Bytes: the fixed body with a padding
// member, {"ok":true,"id":12345,"pad":"xxx..."}; the fixed body itself when `bytes` is too small.
inline std::string padded_body(std::size_t bytes) {
  constexpr std::string_view kOpen = R"({"ok":true,"id":12345,"pad":")";
  constexpr std::string_view kClose = R"("})";
  if (bytes < kOpen.size() + kClose.size()) return std::string(kUpstreamBody);
  std::string body(kOpen);
  body.append(bytes - kOpen.size() - kClose.size(), 'x');
  body += kClose;
  return body;
}

// Response header idemproxy sets on a replayed response.
inline constexpr std::string_view kReplayHeader = "Idempotent-Replay";

}  // namespace idem::bench
