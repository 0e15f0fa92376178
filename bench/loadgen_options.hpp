#pragma once
// idem-loadgen's command line: what to send, how hard, for how long, and what every response must
// look like. Parsing validates every bound, so the engine can trust the values.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace idem::bench {

// In --body, replaced by each request's key: first requests then differ in body as real ones do
// (the proxy remembers a repeated fingerprint: fingerprint/recent_digests.hpp).
inline constexpr std::string_view kBodyKeyPlaceholder = "{key}";

// How the Idempotency-Key header is chosen for each request.
enum class KeyMode {
  none,    // no key header (direct, nginx, passthrough)
  unique,  // a fresh key on every request: every request is a first request
  replay,  // cycle through K keys completed by a warm-up pass: every request is a replay
  same,    // the storm: every connection sends the same key at the same instant
};

// What the run does, derived from the options.
enum class LoadMode {
  closed,  // each connection sends its next request as soon as the previous response arrives
  open,    // requests at a fixed rate; latency from the intended send time (no coordinated omission)
  storm,   // rounds of concurrent duplicates of one key
  idle,    // open idle keep-alive connections and hold them
};

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

struct LoadgenOptions {
  std::string scenario = "unnamed";
  HostPort target;
  std::optional<HostPort> count_from;  // an idem-bench-upstream whose execution count is checked

  std::string method = "POST";
  std::string path = "/";
  std::string body = R"({"amount":100})";
  std::vector<std::pair<std::string, std::string>> headers;
  KeyMode keys = KeyMode::none;
  std::size_t replay_keys = 0;  // K of replay:K
  std::string key_header = "Idempotency-Key";

  unsigned connections = 1;
  unsigned threads = 1;
  std::chrono::nanoseconds duration = std::chrono::seconds(10);  // cap of the measured phase
  std::uint64_t max_requests = 0;                                 // 0: bounded by duration only
  double rate = 0;                                                // requests/s; > 0: open loop
  std::chrono::nanoseconds warmup{0};
  std::uint64_t warmup_requests = 0;  // > 0: the warm-up phase ends after this many requests
  unsigned rounds = 1;  // storm rounds, a fresh key each
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);  // per connect and per request

  std::size_t body_bytes = 0;  // > 0: ask the bench upstream for a body this long (Bench-Body-Bytes)

  unsigned expect_status = 200;
  std::string expect_body;  // defaults to the bench upstream's body (of body_bytes when set)

  unsigned idle_connections = 0;
  std::chrono::nanoseconds hold{0};
  std::optional<int> rss_pid;  // sample this process's VmRSS during the run

  // Shell commands run right before and right after the measured phase (bench/run.sh --cost zeroes
  // and dumps callgrind's counters with them); a failing command fails the run.
  std::string before_measure;
  std::string after_measure;

  std::string json_path;  // empty: stdout
  bool histogram_buckets = false;

  LoadMode mode() const;
};

std::string_view key_mode_text(KeyMode mode);
std::string_view load_mode_name(LoadMode mode);
std::string keys_description(const LoadgenOptions& options);  // "none", "unique", "replay:1000", "same"

struct ParseOutcome {
  std::optional<LoadgenOptions> options;  // set when the command line is valid
  std::string error;                      // why not, otherwise (empty with --help)
};
ParseOutcome parse_options(int argc, char** argv);
std::string_view usage();

}  // namespace idem::bench
