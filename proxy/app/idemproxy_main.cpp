// idemproxy: the sidecar reverse proxy. The one place that wires concrete implementations:
// one worker per io thread, each with its own Postgres pool slice and upstream pool.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "app/record_commands.hpp"
#include "config/config.hpp"
#include "http/runtime.hpp"
#include "http/reaper.hpp"
#include "http/replay_cache.hpp"
#include "http/upstream_pool.hpp"
#include "http/worker.hpp"
#include "log/log.hpp"
#include "store/pg/migrate.hpp"
#include "store/pg/pg_store.hpp"

#ifndef IDEMPROXY_VERSION
#define IDEMPROXY_VERSION "0.0.0"
#endif

namespace {
using namespace idem;

constexpr std::string_view kUsage =
    "usage: idemproxy --config FILE [--check | --migrate]\n"
    "       idemproxy --config FILE (--inspect | --release) ROUTE KEY [--header 'Name: value']...\n"
    "       idemproxy --version\n"
    "\n"
    "  --config FILE  YAML configuration (see config/idemproxy.example.yaml)\n"
    "  --check        validate the configuration, print every problem as file:line:col, exit 1 if any\n"
    "  --migrate      apply the database schema (idempotent; safe from several pods at once)\n"
    "  --inspect      print the record of KEY on ROUTE as JSON (state, fingerprint, times, status)\n"
    "  --release      release an 'unknown' or in-flight record so the next retry executes\n"
    "  --header       a scope header of the original request (e.g. 'X-Tenant-Id: acme'), repeatable\n"
    "  --version      print the version\n"
    "\n"
    "Signals: SIGTERM/SIGINT drain and exit 0 (a second one exits at once).\n";

struct Options {
  std::string config_path;
  bool check = false;
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
  if (!options.version && options.config_path.empty()) {
    std::cerr << "idemproxy: --config FILE is required\n\n" << kUsage;
    return std::nullopt;
  }
  return options;
}

std::size_t share(std::size_t total, unsigned parts) { return std::max<std::size_t>(1, (total + parts - 1) / parts); }

// Everything one io thread owns. Member order is destruction order reversed: the io_context
// outlives every object that registered with it.
struct WorkerSlot {
  boost::asio::io_context io{1};
  std::unique_ptr<store::pg::PgStore> store;
  std::unique_ptr<http::UpstreamPool> upstream;
  http::BackgroundTasks background;
  std::unique_ptr<http::Worker> worker;
  std::thread thread;
};

int run_proxy(config::Config loaded) {
  const unsigned workers = loaded.workers != 0 ? loaded.workers : std::max(1u, std::thread::hardware_concurrency());
  const auto drain_timeout = loaded.drain_timeout;
  auto runtime = std::make_shared<const http::RuntimeConfig>(std::move(loaded));
  const config::Config& config = runtime->config;

  // Signals are taken synchronously by the main thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::atomic<std::size_t> waiting_duplicates{0};
  http::ReplayCache replay_cache(config.replay_cache.max_bytes);
  std::vector<std::unique_ptr<WorkerSlot>> slots;
  try {
    for (unsigned i = 0; i < workers; ++i) {
      auto slot = std::make_unique<WorkerSlot>();
      store::pg::PoolOptions pool;
      pool.dsn = config.store.postgres.dsn;
      pool.size = share(config.store.postgres.pool_size, workers);
      pool.connect_timeout = config.store.postgres.connect_timeout;
      pool.query_timeout = config.store.postgres.query_timeout;
      pool.acquire_timeout = config.store.postgres.acquire_timeout;
      slot->store = std::make_unique<store::pg::PgStore>(slot->io, pool);
      slot->upstream = std::make_unique<http::UpstreamPool>(
          slot->io, config.upstream, share(config.upstream.max_connections, workers), config.limits.max_response_body);
      slot->worker = std::make_unique<http::Worker>(
          slot->io, http::WorkerServices{runtime, *slot->store, *slot->upstream, slot->background, waiting_duplicates,
                                     replay_cache});
      slots.push_back(std::move(slot));
    }
  } catch (const std::exception& e) {
    log::error("startup_failed", {{"error", e.what()}, {"listen", config.listen.host + ":" + std::to_string(config.listen.port)}});
    return 1;
  }

  // One reaper per process, on the first worker's thread.
  http::Reaper reaper(slots.front()->io, *slots.front()->store, config.reaper);
  reaper.start();

  std::atomic<unsigned> running{workers};
  for (auto& slot : slots) {
    slot->store->start();
    slot->worker->start();
    slot->thread = std::thread([&slot = *slot, &running] {
      slot.io.run();
      running.fetch_sub(1);
    });
  }
  log::info("listening", {{"address", config.listen.host + ":" + std::to_string(config.listen.port)},
                          {"workers", workers}, {"upstream", config.upstream.url}, {"version", IDEMPROXY_VERSION}});

  bool draining = false;
  auto drain_deadline = std::chrono::steady_clock::time_point::max();
  while (!(draining && running.load() == 0)) {
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
      for (auto& slot : slots) {
        const bool reaps = slot == slots.front();
        slot->worker->drain([store = slot->store.get(), reaps, &reaper] {
          if (reaps) reaper.stop();
          store->stop();
        });
      }
    } else if (sig == SIGHUP) {
      log::warn("reload_not_supported", {});
    }
    if (draining && std::chrono::steady_clock::now() > drain_deadline) {
      // Requests still running lose their answer; their records stay in flight and their
      // leases decide what a retry gets.
      log::error("drain_timeout", {{"drain_timeout_ms", static_cast<std::int64_t>(drain_timeout.count())}});
      std::_Exit(1);
    }
  }
  for (auto& slot : slots) slot->thread.join();
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

  const config::LoadResult loaded = config::load_config_file(options->config_path);
  for (const auto& issue : loaded.issues) std::cerr << issue.to_string() << "\n";
  if (!loaded.config) return 1;
  if (options->check) {
    std::cout << options->config_path << ": configuration OK (" << loaded.config->routes.size() << " routes)\n";
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
  return run_proxy(*loaded.config);
}
