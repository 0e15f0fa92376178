// idemproxy: the sidecar reverse proxy. Command line, --check, --migrate and the record commands;
// serving is app/proxy_process (the wiring) under the signal and reload loop below.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <pthread.h>

#include <chrono>
#include <iostream>
#include <ostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/config_watcher.hpp"
#include "app/proxy_process.hpp"
#include "app/record_commands.hpp"
#include "config/config_loader.hpp"
#include "log/log.hpp"
#include "pg/replication_watch.hpp"
#include "store/pg/migrations.hpp"
#include "tls/tls_context.hpp"

#ifndef IDEMPROXY_VERSION
#define IDEMPROXY_VERSION "0.0.0"
#endif

namespace {
using namespace idem;

constexpr std::string_view kUsage =
    "usage: idemproxy --config FILE [--check [--against OLD] | --migrate]\n"
    "       idemproxy --config FILE (--inspect | --release) ROUTE KEY [--header 'Name: value']...\n"
    "       idemproxy --version\n"
    "\n"
    "  --config FILE  YAML configuration (see config/idemproxy.example.yaml)\n"
    "  --check        validate the configuration, print every problem as file:line:col, exit 1 if any;\n"
    "                 when the store is reachable, print its replication mode\n"
    "  --against OLD  with --check: check FILE as a reload over OLD would, and warn at each route whose\n"
    "                 stored keys the change makes unreachable (renamed, scope or key source changed,\n"
    "                 requests handed to another route): their retries would execute again\n"
    "  --migrate      apply the database schema (idempotent; safe from several pods at once)\n"
    "  --inspect      print the record of KEY on ROUTE as JSON (state, fingerprint, times, status)\n"
    "  --release      release an 'unknown' or in-flight record so the next retry executes\n"
    "  --header       a scope header of the original request (e.g. 'X-Tenant-Id: acme'), repeatable;\n"
    "                 its Host ('Host: api.example.com') on a route that scopes keys by host\n"
    "  --version      print the version\n"
    "\n"
    "Signals: SIGTERM/SIGINT drain and exit 0 (a second one exits at once).\n";

struct Options {
  std::string config_path;
  bool check = false;
  std::string against_path;  // --check --against OLD: check as a reload over OLD would
  bool migrate = false;
  bool version = false;
  std::optional<app::RecordCommand> record_command;
};

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--config" && i + 1 < argc) {
      options.config_path = argv[++i];
    } else if (arg.starts_with("--config=")) {
      options.config_path = std::string(arg.substr(9));
    } else if (arg == "--check") {
      options.check = true;
    } else if (arg == "--against" && i + 1 < argc) {
      options.against_path = argv[++i];
    } else if (arg == "--migrate") {
      options.migrate = true;
    } else if (arg == "--version") {
      options.version = true;
    } else if ((arg == "--inspect" || arg == "--release") && i + 2 < argc) {
      options.record_command.emplace();
      options.record_command->kind =
          arg == "--inspect" ? app::RecordCommand::Kind::inspect : app::RecordCommand::Kind::release;
      options.record_command->route = argv[++i];
      options.record_command->key = argv[++i];
    } else if (arg == "--header" && i + 1 < argc && options.record_command) {
      const std::string_view header = argv[++i];
      const auto colon = header.find(':');
      if (colon == std::string_view::npos) {
        std::cerr << "idemproxy: --header expects 'Name: value'\n";
        return std::nullopt;
      }
      std::string_view value = header.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      options.record_command->headers.emplace_back(std::string(header.substr(0, colon)), std::string(value));
    } else {
      std::cerr << "idemproxy: unknown argument '" << arg << "'\n\n" << kUsage;
      return std::nullopt;
    }
  }
  if (!options.against_path.empty() && !options.check) {
    std::cerr << "idemproxy: --against OLD goes with --check\n\n" << kUsage;
    return std::nullopt;
  }
  if (!options.version && options.config_path.empty()) {
    std::cerr << "idemproxy: --config FILE is required\n\n" << kUsage;
    return std::nullopt;
  }
  return options;
}

// Every TLS file of the configuration loaded the way the proxy will load it (for --check: a
// readable file may still hold a broken PEM or a key of another certificate).
std::vector<std::string> tls_problems(const config::Config& config) {
  std::vector<std::string> problems;
  if (config.tls.enabled()) {
    if (auto loaded = tls::load_listener_tls(config.tls); !loaded.tls) problems.push_back(loaded.error);
  }
  for (const config::UpstreamConfig& upstream : config.upstreams) {
    if (!upstream.tls.enabled) continue;
    if (auto loaded = tls::load_upstream_tls(upstream.tls); !loaded.context) problems.push_back(loaded.error);
  }
  return problems;
}

// The timing model as it applies (README "Timing"): each route's shortest lease with its formula,
// the drain that covers the longest exchange, and the pod's termination grace period that must
// cover the drain.
void print_timing(const config::Config& config, std::ostream& out) {
  for (const core::Route& route : config.routes) {
    const std::string& upstream =
        route.forwarding.upstream.empty() ? config.upstreams.front().name : route.forwarding.upstream;
    out << "route " << route.policy.name << ": upstream " << upstream;
    if (route.policy.key == core::KeyRequirement::off) {
      out << ", key: off (no lease)\n";
      continue;
    }
    const core::ExchangeBudget budget =
        core::longest_exchange(config::exchange_timeouts(route, config.upstreams, config.store.postgres));
    out << ", lease " << config::describe_duration(route.policy.lease)
        << " >= " << config::describe_budget(budget, true) << "\n";
  }
  const core::ExchangeBudget longest = config::longest_exchange_of(config);
  out << "drain_timeout: " << config::describe_duration(config.drain_timeout) << " (the longest exchange "
      << config::describe_budget(longest, false) << ")\n";
  // The kubelet's SIGKILL must not cut the sequence of deploy/README.md "Shutdown, in order": the
  // app's preStop sleep, the app finishing its slowest request, then the sidecar's drain.
  constexpr std::chrono::milliseconds kPreStopSleep{5'000};
  const std::chrono::milliseconds slowest = config::longest_upstream_timeout(config);
  const auto grace = std::chrono::ceil<std::chrono::seconds>(kPreStopSleep + slowest + config.drain_timeout);
  out << "terminationGracePeriodSeconds: at least " << grace.count() << " (app preStop "
      << config::describe_duration(kPreStopSleep) << " + the longest upstream timeout "
      << config::describe_duration(slowest) << " + drain_timeout " << config::describe_duration(config.drain_timeout)
      << ")\n";
}

// Runs the proxy until a signal drains it: signals are taken synchronously by this thread only
// (blocked before any worker thread starts, so every thread inherits the mask), and the
// configuration is watched here between them.
int run_proxy(config::Config loaded, const std::string& config_path, std::optional<app::FileVersion> config_version) {
  const auto drain_timeout = loaded.drain_timeout;
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // The TLS files are noted before they are read: a change while the proxy starts triggers a reload.
  app::ConfigWatcher watcher(config_path, config_version, loaded.tls);
  const std::unique_ptr<app::ProxyProcess> process = app::ProxyProcess::start(std::move(loaded));
  if (!process) return 1;

  bool draining = false;
  auto drain_deadline = std::chrono::steady_clock::time_point::max();
  while (!(draining && process->idle())) {
    timespec tick{0, 100'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      if (draining) {
        log::warn("shutdown_forced", {{"signal", sig}});
        std::_Exit(1);
      }
      draining = true;
      drain_deadline = std::chrono::steady_clock::now() + drain_timeout;
      log::info("draining", {{"signal", sig}, {"drain_timeout_ms", static_cast<std::int64_t>(drain_timeout.count())}});
      process->drain();
    }
    if (!draining) {
      if (const auto trigger = watcher.poll(sig == SIGHUP, process->config().tls)) process->reload(*trigger, watcher);
    }
    if (draining && std::chrono::steady_clock::now() > drain_deadline) {
      // Requests still running lose their answer; their records stay in flight and their
      // leases decide what a retry gets.
      log::error("drain_timeout", {{"drain_timeout_ms", static_cast<std::int64_t>(drain_timeout.count())}});
      std::_Exit(1);
    }
  }
  process->stop();
  log::info("stopped", {});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = parse_options(argc, argv);
  if (!options) return 2;
  if (options->version) {
    std::cout << "idemproxy " << IDEMPROXY_VERSION << "\n";
    return 0;
  }

  const std::optional<app::FileVersion> config_version = app::file_version(options->config_path);
  std::optional<config::Config> against;
  if (!options->against_path.empty()) {
    config::LoadResult previous = config::load_config_file(options->against_path);
    if (!previous.config) {
      for (const auto& issue : previous.issues) std::cerr << issue.to_string() << "\n";
      std::cerr << "idemproxy: --against " << options->against_path << " does not load; nothing compared\n";
      return 1;
    }
    against = std::move(previous.config);
  }
  const config::LoadResult loaded =
      config::load_config_file(options->config_path, config::process_environment(), against ? &*against : nullptr);
  for (const auto& issue : loaded.issues) std::cerr << issue.to_string() << "\n";
  if (!loaded.config) return 1;
  if (options->check) {
    const std::vector<std::string> tls_issues = tls_problems(*loaded.config);
    for (const auto& issue : tls_issues) std::cerr << options->config_path << ": " << issue << "\n";
    if (!tls_issues.empty()) return 1;
    std::cout << options->config_path << ": configuration OK (" << loaded.config->routes.size() << " routes)\n";
    print_timing(*loaded.config, std::cout);
    // Informational only: a store that is down does not fail the check.
    const auto& postgres = loaded.config->store.postgres;
    std::cout << "store: " << pg::check_replication_report(postgres.dsn, postgres.connect_timeout) << "\n";
    return 0;
  }
  if (options->record_command) return app::run_record_command(*loaded.config, *options->record_command);
  if (options->migrate) {
    const auto result = store::pg::migrate(loaded.config->store.postgres.dsn);
    if (!result.ok) {
      std::cerr << "idemproxy: migration failed: " << result.error << "\n";
      return 1;
    }
    std::cout << "idemproxy: schema at version " << result.schema_version << " (" << result.applied << " applied)\n";
    return 0;
  }
  return run_proxy(*loaded.config, options->config_path, config_version);
}
