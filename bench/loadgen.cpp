// idem-loadgen: HTTP/1.1 keep-alive load generator for the idemproxy bench. Generates the
// Idempotency-Keys each scenario needs, verifies every response (status, replay header, body, and
// optionally the upstream's execution count) and prints one JSON object per run.
// Exit status: 0 every response verified, 1 any error, 2 bad usage.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <boost/json/serialize.hpp>

#include "idle_hold.hpp"
#include "load_phase.hpp"
#include "loadgen_options.hpp"
#include "process_memory.hpp"
#include "request_plan.hpp"
#include "request_template.hpp"
#include "run_json.hpp"
#include "storm.hpp"
#include "upstream_count.hpp"

namespace {
using namespace idem::bench;
namespace json = boost::json;
using boost::asio::ip::tcp;

constexpr std::chrono::seconds kProbeTimeout{5};
constexpr std::chrono::seconds kMinCompletionCap{60};

std::string random_run_id() {
  std::random_device device;
  std::mt19937_64 generator(static_cast<std::uint64_t>(device()) << 32 | device());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "bench-";
  for (int i = 0; i < 12; ++i) id.push_back(kHex[generator() % 16]);
  return id;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

double seconds(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e9; }

bool any_transport_error(const ErrorCounts& errors) {
  return errors.count(ErrorKind::write_failed) + errors.count(ErrorKind::read_failed) +
             errors.count(ErrorKind::timeout) != 0;
}

// The upstream's execution count around the measured phase.
class ExecutionCheck {
 public:
  explicit ExecutionCheck(std::optional<tcp::endpoint> upstream) : upstream_(std::move(upstream)) {}
  bool enabled() const { return upstream_.has_value(); }
  void before(ErrorCounts& errors) { before_ = probe(errors); }
  void after(ErrorCounts& errors) { after_ = probe(errors); }
  // `expected`: nullopt when the phase's outcome leaves it unknowable (a request may or may not
  // have reached the upstream).
  void judge(std::optional<std::uint64_t> expected, ErrorCounts& errors) {
    expected_ = expected;
    if (before_ && after_ && expected_ && *after_ - *before_ != *expected_) {
      errors.add(ErrorKind::execution_count_mismatch);
    }
  }
  json::value to_json() const {
    if (!upstream_) return nullptr;
    json::object out;
    out["upstream"] = upstream_->address().to_string() + ":" + std::to_string(upstream_->port());
    out["before"] = before_ ? json::value(*before_) : json::value(nullptr);
    out["after"] = after_ ? json::value(*after_) : json::value(nullptr);
    out["delta"] = before_ && after_ ? json::value(*after_ - *before_) : json::value(nullptr);
    out["expected"] = expected_ ? json::value(*expected_) : json::value(nullptr);
    return out;
  }

 private:
  std::optional<std::uint64_t> probe(ErrorCounts& errors) {
    if (!upstream_) return std::nullopt;
    auto count = read_execution_count(*upstream_, kProbeTimeout);
    if (!count) errors.add(ErrorKind::count_probe_failed);
    return count;
  }
  std::optional<tcp::endpoint> upstream_;
  std::optional<std::uint64_t> before_;
  std::optional<std::uint64_t> after_;
  std::optional<std::uint64_t> expected_;
};

struct Outcome {
  PhaseStats stats;             // the measured phase
  ErrorCounts warmup_errors;    // key completion and time warm-up
  std::uint64_t warmup_requests = 0;
  std::chrono::nanoseconds elapsed{0};
  json::object extra;           // mode-specific fields
};

std::unique_ptr<RequestPlan> make_plan(const LoadgenOptions& options, const std::string& prefix,
                                       const std::vector<std::string>* replay_bodies) {
  switch (options.keys) {
    case KeyMode::none: return std::make_unique<PlainPlan>(options.expect_status, options.expect_body);
    case KeyMode::unique: return std::make_unique<UniqueKeyPlan>(prefix, options.expect_status, options.expect_body);
    case KeyMode::replay:
      return std::make_unique<ReplayPlan>(prefix, *replay_bodies, options.connections, options.expect_status);
    case KeyMode::same: break;  // the storm has no per-connection plan
  }
  return nullptr;
}

LoadPhaseSpec phase_spec(const LoadgenOptions& options, const tcp::endpoint& target, const RequestTemplate& request,
                         RequestPlan& plan) {
  LoadPhaseSpec spec;
  spec.endpoint = target;
  spec.request = &request;
  spec.plan = &plan;
  spec.connections = options.connections;
  spec.threads = options.threads;
  spec.rate = options.rate;
  spec.duration = options.duration;
  spec.max_requests = options.max_requests;
  spec.timeout = options.timeout;
  return spec;
}

// Completes the K replay keys once; nullopt (with warmup_failed counted) when any did not complete.
std::optional<std::vector<std::string>> complete_replay_keys(const LoadgenOptions& options, const tcp::endpoint& target,
                                                             const RequestTemplate& request, const std::string& prefix,
                                                             Outcome& outcome) {
  const unsigned connections = static_cast<unsigned>(std::min<std::size_t>(options.connections, options.replay_keys));
  ReplayCompletionPlan plan(prefix, options.replay_keys, connections, options.expect_status, options.expect_body);
  LoadPhaseSpec spec = phase_spec(options, target, request, plan);
  spec.connections = connections;
  spec.rate = 0;
  spec.max_requests = 0;
  spec.duration = std::max<std::chrono::nanoseconds>(options.duration, kMinCompletionCap);
  const PhaseResult completion = run_load_phase(spec);
  outcome.warmup_requests += completion.stats.responses;
  outcome.warmup_errors.merge(completion.stats.errors);

  std::vector<std::string> bodies;
  std::uint64_t missing = 0;
  for (auto& body : plan.take_bodies()) {
    if (body) bodies.push_back(std::move(*body));
    else ++missing;
  }
  if (missing != 0) {
    outcome.warmup_errors.add(ErrorKind::warmup_failed, missing);
    return std::nullopt;
  }
  return bodies;
}

// Runs --before-measure/--after-measure (through the shell); a failure is recorded in the result
// ("hook_failed") and fails the run.
void run_hook(const char* name, const std::string& command, Outcome& outcome) {
  if (command.empty()) return;
  if (const int status = std::system(command.c_str()); status != 0) {
    std::cerr << "idem-loadgen: --" << name << " command failed (status " << status << "): " << command << "\n";
    outcome.extra["hook_failed"] = name;
  }
}

Outcome run_load(const LoadgenOptions& options, const tcp::endpoint& target, const RequestTemplate& request,
                 const std::string& run_id, ExecutionCheck& executions, RssSeries& rss) {
  Outcome outcome;
  std::optional<std::vector<std::string>> replay_bodies;
  if (options.keys == KeyMode::replay) {
    replay_bodies = complete_replay_keys(options, target, request, run_id, outcome);
    if (!replay_bodies) return outcome;
  }
  // Replay keys are the completed ones; unique keys get a prefix of their own per phase.
  const bool replaying = options.keys == KeyMode::replay;
  if (options.warmup.count() > 0 || options.warmup_requests > 0) {
    auto plan = make_plan(options, replaying ? run_id : run_id + "-w", replay_bodies ? &*replay_bodies : nullptr);
    LoadPhaseSpec spec = phase_spec(options, target, request, *plan);
    spec.duration = options.warmup.count() > 0 ? options.warmup : options.duration;
    spec.max_requests = options.warmup_requests;
    const PhaseResult warmup = run_load_phase(spec);
    outcome.warmup_requests += warmup.stats.responses;
    outcome.warmup_errors.merge(warmup.stats.errors);
  }
  auto plan = make_plan(options, replaying ? run_id : run_id + "-m", replay_bodies ? &*replay_bodies : nullptr);
  executions.before(outcome.stats.errors);
  rss.sample();
  run_hook("before-measure", options.before_measure, outcome);
  const PhaseResult measured = run_load_phase(phase_spec(options, target, request, *plan), [&rss] { rss.sample(); });
  run_hook("after-measure", options.after_measure, outcome);
  rss.sample();
  outcome.stats.merge(measured.stats);
  outcome.elapsed = measured.elapsed;
  executions.after(outcome.stats.errors);

  std::optional<std::uint64_t> expected;
  if (replaying) {
    expected = 0;  // a replay never reaches the upstream
  } else if (!any_transport_error(outcome.stats.errors)) {
    expected = outcome.stats.responses;  // plain and first requests: once each
  }
  executions.judge(expected, outcome.stats.errors);
  if (options.rate > 0 && outcome.elapsed.count() > 0) {
    const double achieved = static_cast<double>(outcome.stats.responses) / seconds(outcome.elapsed);
    outcome.extra["rate_achieved"] = std::round(achieved * 10) / 10;
  }
  return outcome;
}

Outcome run_storm_mode(const LoadgenOptions& options, const tcp::endpoint& target, const RequestTemplate& request,
                       const std::string& run_id, ExecutionCheck& executions) {
  Outcome outcome;
  StormSpec spec;
  spec.endpoint = target;
  spec.request = &request;
  spec.key_prefix = run_id;
  spec.executed_body = options.expect_body;
  spec.connections = options.connections;
  spec.rounds = options.rounds;
  spec.timeout = options.timeout;
  executions.before(outcome.stats.errors);
  StormResult storm = run_storm(spec);
  executions.after(outcome.stats.errors);
  executions.judge(options.rounds, outcome.stats.errors);  // one execution per round, whatever else happened
  outcome.stats.merge(storm.stats);
  outcome.elapsed = storm.elapsed;

  json::array rounds;
  for (const auto& round : storm.rounds) {
    rounds.push_back(json::object{{"executed", round.executed}, {"replayed", round.replayed}, {"conflicts", round.conflicts}});
  }
  outcome.extra["storm_rounds"] = std::move(rounds);
  return outcome;
}

Outcome run_idle_mode(const LoadgenOptions& options, const tcp::endpoint& target, const RequestTemplate& request,
                      const std::string& run_id, ExecutionCheck& executions, RssSeries& rss) {
  Outcome outcome;
  auto plan = make_plan(options, run_id + "-i", nullptr);
  IdleSpec spec;
  spec.endpoint = target;
  spec.request = &request;
  spec.plan = plan.get();
  spec.connections = options.idle_connections;
  spec.hold = options.hold;
  spec.timeout = options.timeout;
  std::optional<std::uint64_t> rss_before = rss.enabled() ? resident_kib(*options.rss_pid) : std::nullopt;
  std::optional<std::uint64_t> rss_held;
  executions.before(outcome.stats.errors);
  const IdleResult idle = run_idle_hold(
      spec,
      [&] {
        rss.sample();
        rss_held = rss.last();
      },
      [&rss] { rss.sample(); });
  outcome.stats.merge(idle.stats);
  outcome.elapsed = idle.setup + options.hold;
  executions.after(outcome.stats.errors);
  executions.judge(any_transport_error(outcome.stats.errors) ? std::nullopt : std::optional<std::uint64_t>(outcome.stats.responses),
                   outcome.stats.errors);
  if (idle.established != options.idle_connections) {
    // Every failed connection was counted as an error kind already; this is the summary.
    outcome.extra["idle_missing"] = options.idle_connections - idle.established;
  }
  outcome.extra["idle_connections"] = options.idle_connections;
  outcome.extra["idle_established"] = idle.established;
  outcome.extra["idle_setup_s"] = seconds(idle.setup);
  outcome.extra["hold_s"] = seconds(options.hold);
  if (rss_before) outcome.extra["rss_before_idle_kib"] = *rss_before;
  if (rss_held) outcome.extra["rss_idle_held_kib"] = *rss_held;
  return outcome;
}

void write_summary(const LoadgenOptions& options, const Outcome& outcome, std::uint64_t errors, double throughput) {
  const auto& h = outcome.stats.latency;
  std::cerr << "[idem-loadgen] " << options.scenario << ": " << outcome.stats.responses << " responses in "
            << seconds(outcome.elapsed) << " s = " << static_cast<std::uint64_t>(throughput) << " req/s; p50 "
            << microseconds(h.value_at_percentile(50)) << " us, p99 " << microseconds(h.value_at_percentile(99))
            << " us, max " << microseconds(h.max()) << " us; errors " << errors << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  const ParseOutcome parsed = parse_options(argc, argv);
  if (!parsed.options) {
    if (parsed.error.empty()) {
      std::cout << usage();
      return 0;
    }
    std::cerr << "idem-loadgen: " << parsed.error << "\n\n" << usage();
    return 2;
  }
  const LoadgenOptions& options = *parsed.options;

  tcp::endpoint target;
  std::optional<tcp::endpoint> count_endpoint;
  try {
    target = resolve_endpoint(options.target.host, options.target.port);
    if (options.count_from) count_endpoint = resolve_endpoint(options.count_from->host, options.count_from->port);
  } catch (const std::exception& e) {
    std::cerr << "idem-loadgen: cannot resolve the target: " << e.what() << "\n";
    return 2;
  }

  const RequestTemplate request(options);
  const std::string run_id = random_run_id();
  ExecutionCheck executions(count_endpoint);
  RssSeries rss(options.rss_pid);
  const std::string started_at = utc_now_iso8601();
  const LoadMode mode = options.mode();

  Outcome outcome;
  switch (mode) {
    case LoadMode::closed:
    case LoadMode::open: outcome = run_load(options, target, request, run_id, executions, rss); break;
    case LoadMode::storm: outcome = run_storm_mode(options, target, request, run_id, executions); break;
    case LoadMode::idle: outcome = run_idle_mode(options, target, request, run_id, executions, rss); break;
  }

  ErrorCounts all_errors = outcome.stats.errors;
  all_errors.merge(outcome.warmup_errors);
  const double elapsed_s = seconds(outcome.elapsed);
  const double throughput = elapsed_s > 0 ? static_cast<double>(outcome.stats.responses) / elapsed_s : 0.0;

  json::object out;
  out["scenario"] = options.scenario;
  out["tool"] = "idem-loadgen";
  out["started_at"] = started_at;
  out["mode"] = load_mode_name(mode);
  out["target"] = options.target.text();
  out["method"] = options.method;
  out["path"] = options.path;
  out["keys"] = keys_description(options);
  out["connections"] = mode == LoadMode::idle ? options.idle_connections : options.connections;
  out["threads"] = options.threads;
  if (mode == LoadMode::open) out["rate"] = options.rate;
  if (mode == LoadMode::storm) out["rounds"] = options.rounds;
  if (mode == LoadMode::closed || mode == LoadMode::open) out["duration_s"] = seconds(options.duration);
  out["warmup_s"] = seconds(options.warmup);
  out["elapsed_s"] = std::round(elapsed_s * 1000) / 1000;
  out["requests"] = outcome.stats.responses;
  out["verified"] = outcome.stats.verified;
  out["connects"] = outcome.stats.connects;
  out["throughput_rps"] = std::round(throughput * 10) / 10;
  out["errors"] = errors_json(all_errors);
  out["statuses"] = statuses_json(outcome.stats);
  out["latency_us"] = latency_json(outcome.stats.latency);
  out["spectrum"] = spectrum_json(outcome.stats.latency);
  if (options.warmup_requests > 0) out["warmup_requests_cap"] = options.warmup_requests;
  if (options.histogram_buckets) out["buckets"] = buckets_json(outcome.stats.latency);
  out["warmup"] = json::object{{"requests", outcome.warmup_requests}, {"errors", errors_json(outcome.warmup_errors)}};
  out["executions"] = executions.to_json();
  if (rss.enabled()) out["rss_kib"] = rss.json();
  for (auto& [name, value] : outcome.extra) out[name] = value;

  const std::string text = json::serialize(out) + "\n";
  if (options.json_path.empty()) {
    std::cout << text << std::flush;
  } else {
    std::ofstream file(options.json_path, std::ios::binary | std::ios::trunc);
    file << text;
    if (!file) {
      std::cerr << "idem-loadgen: cannot write " << options.json_path << "\n";
      return 1;
    }
  }
  write_summary(options, outcome, all_errors.total(), throughput);
  return all_errors.total() == 0 && !outcome.extra.contains("hook_failed") ? 0 : 1;
}
