#include "loadgen_options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "bench_protocol.hpp"

namespace idem::bench {
namespace {

constexpr unsigned kMaxConnections = 20'000;
constexpr unsigned kMaxThreads = 64;
constexpr double kMaxSeconds = 3600;
constexpr double kMaxRate = 10'000'000;
constexpr std::size_t kMaxReplayKeys = 10'000'000;
constexpr unsigned kMaxRounds = 10'000;

constexpr std::string_view kUsage = R"(usage: idem-loadgen --target HOST:PORT [options]

What to send
  --scenario NAME          name written in the JSON result (default: unnamed)
  --method M --path P      request line (default: POST /)
  --body TEXT              request body (default: {"amount":100}); "" for none; a {key} in it
                           is replaced by each request's key
  --header 'Name: value'   extra request header (repeatable)
  --keys MODE              none | unique | replay:K | same   (default: none)
  --body-bytes N           ask idem-bench-upstream for an N-byte response body (and expect it)
  --key-header NAME        default: Idempotency-Key

How hard and how long (every phase is bounded by --duration; the process always stops itself)
  --connections N          keep-alive connections (default 1)
  --threads N              io threads, connections spread across them (default 1)
  --duration S             measured phase cap in seconds (default 10)
  --requests N             stop after N requests in total (default: duration only)
  --rate R                 open loop: R requests/s over all connections, latency measured from
                           each request's intended send time (wrk2-style)
  --warmup S               unrecorded load before the measured phase (default 0)
  --warmup-requests N      end the warm-up after N requests (capped by --warmup, or --duration)
  --before-measure CMD     shell command run right before the measured phase (after the warm-up)
  --after-measure CMD      shell command run right after it; either failing fails the run
  --rounds N               storm (--keys same): rounds, one fresh key each (default 1)
  --timeout S              per connect and per request (default 5)

What every response must be
  --expect-status N        default 200
  --expect-body TEXT       default: the idem-bench-upstream body
  --count-from HOST:PORT   idem-bench-upstream to read the execution count from before and after:
                           unique/none must execute once per response, replay never, storm once a round

Memory
  --idle-connections N     open N keep-alive connections (one verified request each) and hold them
  --hold S                 how long to hold them (default 5)
  --rss-pid PID            sample VmRSS of PID every second (and around the idle hold)

Output
  --json FILE              write the run's JSON object to FILE (default: stdout)
  --histogram-buckets      include the raw histogram buckets in the JSON
)";

std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t max) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value > max) return std::nullopt;
  return value;
}

std::optional<double> parse_number(std::string_view text, double max) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value) || value < 0 || value > max) {
    return std::nullopt;
  }
  return value;
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const auto port = parse_unsigned(text.substr(colon + 1), 65535);
  if (!port || *port == 0) return std::nullopt;
  return HostPort{std::string(text.substr(0, colon)), static_cast<std::uint16_t>(*port)};
}

std::chrono::nanoseconds seconds_to_ns(double seconds) {
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
}

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool has_line_break(std::string_view text) { return text.find_first_of("\r\n") != std::string_view::npos; }

}  // namespace

LoadMode LoadgenOptions::mode() const {
  if (idle_connections > 0) return LoadMode::idle;
  if (keys == KeyMode::same) return LoadMode::storm;
  if (rate > 0) return LoadMode::open;
  return LoadMode::closed;
}

std::string_view key_mode_text(KeyMode mode) {
  switch (mode) {
    case KeyMode::none: return "none";
    case KeyMode::unique: return "unique";
    case KeyMode::replay: return "replay";
    case KeyMode::same: return "same";
  }
  return "?";
}

std::string_view load_mode_name(LoadMode mode) {
  switch (mode) {
    case LoadMode::closed: return "closed";
    case LoadMode::open: return "open";
    case LoadMode::storm: return "storm";
    case LoadMode::idle: return "idle";
  }
  return "?";
}

std::string keys_description(const LoadgenOptions& options) {
  std::string text{key_mode_text(options.keys)};
  if (options.keys == KeyMode::replay) text += ":" + std::to_string(options.replay_keys);
  return text;
}

std::string_view usage() { return kUsage; }

ParseOutcome parse_options(int argc, char** argv) {
  LoadgenOptions options;
  options.expect_body = std::string(kUpstreamBody);
  bool have_target = false;
  bool hold_given = false;
  bool expect_body_given = false;
  auto fail = [](std::string message) { return ParseOutcome{std::nullopt, std::move(message)}; };

  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return ParseOutcome{std::nullopt, ""};
    if (arg == "--histogram-buckets") {
      options.histogram_buckets = true;
      continue;
    }
    if (i + 1 >= argc) return fail("missing value after " + std::string(arg));
    const std::string_view value = argv[++i];
    auto bad = [&] { return fail("invalid value for " + std::string(arg) + ": '" + std::string(value) + "'"); };

    if (arg == "--target") {
      auto parsed = parse_host_port(value);
      if (!parsed) return bad();
      options.target = *parsed;
      have_target = true;
    } else if (arg == "--count-from") {
      auto parsed = parse_host_port(value);
      if (!parsed) return bad();
      options.count_from = *parsed;
    } else if (arg == "--scenario") {
      if (value.empty() || has_line_break(value)) return bad();
      options.scenario = value;
    } else if (arg == "--method") {
      if (value.empty()) return bad();
      for (char c : value) {
        if (!is_token_char(c)) return bad();
      }
      options.method = value;
    } else if (arg == "--path") {
      if (value.empty() || value.front() != '/' || value.find_first_of(" \r\n") != std::string_view::npos) return bad();
      options.path = value;
    } else if (arg == "--body") {
      options.body = value;
    } else if (arg == "--header") {
      const auto colon = value.find(':');
      if (colon == std::string_view::npos || colon == 0 || has_line_break(value)) return bad();
      std::string_view field_value = value.substr(colon + 1);
      while (!field_value.empty() && field_value.front() == ' ') field_value.remove_prefix(1);
      options.headers.emplace_back(std::string(value.substr(0, colon)), std::string(field_value));
    } else if (arg == "--keys") {
      if (value == "none") {
        options.keys = KeyMode::none;
      } else if (value == "unique") {
        options.keys = KeyMode::unique;
      } else if (value == "same") {
        options.keys = KeyMode::same;
      } else if (value.starts_with("replay:")) {
        auto count = parse_unsigned(value.substr(7), kMaxReplayKeys);
        if (!count || *count == 0) return bad();
        options.keys = KeyMode::replay;
        options.replay_keys = static_cast<std::size_t>(*count);
      } else {
        return bad();
      }
    } else if (arg == "--key-header") {
      if (value.empty()) return bad();
      for (char c : value) {
        if (!is_token_char(c)) return bad();
      }
      options.key_header = value;
    } else if (arg == "--connections") {
      auto n = parse_unsigned(value, kMaxConnections);
      if (!n || *n == 0) return bad();
      options.connections = static_cast<unsigned>(*n);
    } else if (arg == "--threads") {
      auto n = parse_unsigned(value, kMaxThreads);
      if (!n || *n == 0) return bad();
      options.threads = static_cast<unsigned>(*n);
    } else if (arg == "--duration") {
      auto s = parse_number(value, kMaxSeconds);
      if (!s || *s <= 0) return bad();
      options.duration = seconds_to_ns(*s);
    } else if (arg == "--requests") {
      auto n = parse_unsigned(value, UINT32_MAX);
      if (!n) return bad();
      options.max_requests = *n;
    } else if (arg == "--rate") {
      auto r = parse_number(value, kMaxRate);
      if (!r || *r <= 0) return bad();
      options.rate = *r;
    } else if (arg == "--warmup") {
      auto s = parse_number(value, kMaxSeconds);
      if (!s) return bad();
      options.warmup = seconds_to_ns(*s);
    } else if (arg == "--warmup-requests") {
      auto n = parse_unsigned(value, UINT32_MAX);
      if (!n) return bad();
      options.warmup_requests = *n;
    } else if (arg == "--before-measure" || arg == "--after-measure") {
      if (value.empty()) return bad();
      (arg == "--before-measure" ? options.before_measure : options.after_measure) = value;
    } else if (arg == "--rounds") {
      auto n = parse_unsigned(value, kMaxRounds);
      if (!n || *n == 0) return bad();
      options.rounds = static_cast<unsigned>(*n);
    } else if (arg == "--timeout") {
      auto s = parse_number(value, 600);
      if (!s || *s < 0.001) return bad();
      options.timeout = seconds_to_ns(*s);
    } else if (arg == "--expect-status") {
      auto n = parse_unsigned(value, 599);
      if (!n || *n < 100) return bad();
      options.expect_status = static_cast<unsigned>(*n);
    } else if (arg == "--expect-body") {
      options.expect_body = value;
      expect_body_given = true;
    } else if (arg == "--body-bytes") {
      auto n = parse_unsigned(value, kMaxBodyBytes);
      if (!n || *n == 0) return bad();
      options.body_bytes = static_cast<std::size_t>(*n);
    } else if (arg == "--idle-connections") {
      auto n = parse_unsigned(value, kMaxConnections);
      if (!n || *n == 0) return bad();
      options.idle_connections = static_cast<unsigned>(*n);
    } else if (arg == "--hold") {
      auto s = parse_number(value, kMaxSeconds);
      if (!s) return bad();
      options.hold = seconds_to_ns(*s);
      hold_given = true;
    } else if (arg == "--rss-pid") {
      auto n = parse_unsigned(value, INT32_MAX);
      if (!n || *n == 0) return bad();
      options.rss_pid = static_cast<int>(*n);
    } else if (arg == "--json") {
      if (value.empty()) return bad();
      options.json_path = value;
    } else {
      return fail("unknown option " + std::string(arg));
    }
  }

  if (!have_target) return fail("--target HOST:PORT is required");
  if (options.idle_connections > 0 && !hold_given) options.hold = std::chrono::seconds(5);
  if (options.keys == KeyMode::same && options.connections < 2) {
    return fail("--keys same needs at least 2 --connections (the duplicates)");
  }
  if (options.keys == KeyMode::same && options.rate > 0) return fail("--keys same is not an open-loop mode");
  if (options.idle_connections > 0 && (options.keys == KeyMode::same || options.keys == KeyMode::replay)) {
    return fail("--idle-connections takes --keys none or unique");
  }
  if (options.body_bytes > 0) {
    options.headers.emplace_back(std::string(kBodyBytesHeader), std::to_string(options.body_bytes));
    if (!expect_body_given) options.expect_body = padded_body(options.body_bytes);
  }
  options.threads = std::min(options.threads, options.connections);
  return ParseOutcome{std::move(options), ""};
}

}  // namespace idem::bench
