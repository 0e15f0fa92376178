// idemproxy: the sidecar reverse proxy. The one place that wires concrete implementations:
// one worker per io thread, each with its own Postgres pool slice and upstream pool.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "admin/admin_server.hpp"
#include "app/proxy_admin.hpp"
#include "app/record_commands.hpp"
#include "config/config.hpp"
#include "http/runtime.hpp"
#include "http/proxy_metrics.hpp"
#include "http/reaper.hpp"
#include "cache/redis_replay_cache.hpp"
#include "cache/replay_cache.hpp"
#include "tls/tls_context.hpp"
#include "http/upstream_pool.hpp"
#include "http/worker.hpp"
#include "log/log.hpp"
#include "crypto/keyring.hpp"
#include "pg/counters.hpp"
#include "pg/session_options.hpp"
#include "store/encrypting_store.hpp"
#include "store/pg/migrations.hpp"
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
    "  --header       a scope header of the original request (e.g. 'X-Tenant-Id: acme'), repeatable;\n"
    "                 its Host ('Host: api.example.com') on a route that scopes keys by host\n"
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

log::Level to_log_level(config::LogLevel level) {
  switch (level) {
    case config::LogLevel::debug: return log::Level::debug;
    case config::LogLevel::info: return log::Level::info;
    case config::LogLevel::warn: return log::Level::warn;
    case config::LogLevel::error: return log::Level::error;
  }
  return log::Level::info;
}

// A reload keeps the running values of the restart-only settings (config.hpp marks them) and says
// which ones would need a restart.
config::Config keep_restart_only_sections(config::Config next, const config::Config& running) {
  for (const auto& name : config::restart_only_changes(running, next)) log::warn("reload_needs_restart", {{"section", name}});
  return config::keep_restart_only(std::move(next), running);
}

// Identity of the config file's current content, following symlinks (Kubernetes ConfigMap
// volumes swap a symlink to a new file): inode, size and mtime, since file timestamps are coarse
// and two quick writes can share one mtime.
struct FileVersion {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileVersion&) const = default;
};

std::optional<FileVersion> modified_time(const std::string& path) {
  struct stat info{};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileVersion{info.st_dev, info.st_ino, info.st_size,
                     static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
}

// The listener's certificate and key files: a renewed certificate is often written without the
// config file changing (cert-manager, a Kubernetes Secret volume), so they are watched too.
using TlsFileVersions = std::array<std::optional<FileVersion>, 2>;
TlsFileVersions tls_file_versions(const config::ListenerTlsConfig& listener) {
  if (!listener.enabled()) return {};
  return {modified_time(listener.cert_file), modified_time(listener.key_file)};
}

// The listener's TLS context from its files, read now (no context and no error without TLS),
// with a log line naming the certificate it serves.
tls::ListenerTlsResult load_listener_tls_logged(const config::ListenerTlsConfig& listener) {
  if (!listener.enabled()) return {};
  tls::ListenerTlsResult loaded = tls::load_listener_tls(listener);
  if (!loaded.tls) return loaded;
  const tls::CertificateSummary& certificate = loaded.tls->certificate;
  log::write(certificate.expired ? log::Level::warn : log::Level::info, "tls_certificate_loaded",
             {{"cert_file", listener.cert_file}, {"subject", certificate.subject}, {"serial", certificate.serial},
              {"not_after", certificate.not_after}, {"expired", certificate.expired ? "true" : "false"}});
  return loaded;
}

// Every TLS file of the configuration loaded the way the proxy will load it (for --check: a
// readable file may still hold a broken PEM or a key of another certificate).
std::vector<std::string> tls_problems(const config::Config& config) {
  std::vector<std::string> problems;
  if (config.tls.enabled()) {
    if (auto loaded = tls::load_listener_tls(config.tls); !loaded.tls) problems.push_back(loaded.error);
  }
  if (config.upstream.tls.enabled) {
    if (auto loaded = tls::load_upstream_tls(config.upstream.tls); !loaded.context) problems.push_back(loaded.error);
  }
  return problems;
}

void register_process_metrics(metrics::Registry& registry, const cache::ReplayCache& cache, const http::Reaper& reaper,
                              const std::atomic<std::size_t>& waiting, const std::atomic<std::size_t>& connections,
                              const std::atomic<bool>& draining,
                              const config::Config& config) {
  auto& counters = pg::pg_counters();
  auto number = [](auto value) { return static_cast<double>(value); };
  registry.add_callback("idemproxy_replay_cache_hits_total", "Replays answered from the in-process cache.", "counter",
                        [&cache, number] { return number(cache.hits()); });
  registry.add_callback("idemproxy_replay_cache_misses_total", "Keyed requests the in-process cache could not answer.",
                        "counter", [&cache, number] { return number(cache.misses()); });
  registry.add_callback("idemproxy_replay_cache_bytes", "Bytes held by the in-process replay cache.", "gauge",
                        [&cache, number] { return number(cache.bytes()); });
  registry.add_callback("idemproxy_reaper_deleted_total", "Expired records deleted by this process's reaper.", "counter",
                        [&reaper, number] { return number(reaper.deleted_total()); });
  registry.add_callback("idemproxy_waiting_duplicates", "Duplicates waiting for their first request (in_flight: wait).",
                        "gauge", [&waiting, number] { return number(waiting.load()); });
  registry.add_callback("idemproxy_client_connections", "Client connections open.", "gauge",
                        [&connections, number] { return number(connections.load()); });
  registry.add_callback("idemproxy_draining", "1 from the moment a shutdown signal arrives.", "gauge",
                        [&draining] { return draining.load() ? 1.0 : 0.0; });
  const double pool_size = static_cast<double>(config.store.postgres.pool_size);
  registry.add_callback("idemproxy_pg_pool_size", "Postgres connections this process keeps (all workers).", "gauge",
                        [pool_size] { return pool_size; });
  registry.add_callback("idemproxy_pg_pool_waits_total", "Statements that queued for a busy Postgres pool.", "counter",
                        [&counters, number] { return number(counters.acquire_waits.load()); });
  registry.add_callback("idemproxy_pg_pool_wait_timeouts_total",
                        "Statements that found no free Postgres connection within acquire_timeout.", "counter",
                        [&counters, number] { return number(counters.acquire_timeouts.load()); });
  registry.add_callback("idemproxy_pg_statements_total", "Statements sent to Postgres (round trips).", "counter",
                        [&counters, number] { return number(counters.statements_sent.load()); });
  registry.add_callback("idemproxy_pg_connects_failed_total", "Failed Postgres connection attempts.", "counter",
                        [&counters, number] { return number(counters.connects_failed.load()); });
  registry.add_callback("idemproxy_pg_query_timeouts_total", "Postgres statements that passed query_timeout.", "counter",
                        [&counters, number] { return number(counters.query_timeouts.load()); });
}

// The server cancels a statement a little before the client deadline would orphan it (a
// statement left running holds its snapshot and row locks: see session_options.hpp).
std::string session_dsn(const config::PostgresConfig& postgres) {
  return pg::with_session_settings(postgres.dsn, postgres.query_timeout * 9 / 10);
}

std::size_t share(std::size_t total, unsigned parts) { return std::max<std::size_t>(1, (total + parts - 1) / parts); }

// Everything one io thread owns. Member order is destruction order reversed: the io_context
// outlives every object that registered with it.
struct WorkerSlot {
  boost::asio::io_context io{1};
  std::unique_ptr<store::pg::PgStore> store;
  std::unique_ptr<store::Store> sealed;  // the encrypting decorator over `store`, when keys are configured
  std::unique_ptr<cache::RedisReplayCache> shared_cache;  // store.redis: this worker's own connection
  std::unique_ptr<http::UpstreamPool> upstream;
  http::BackgroundTasks background;
  std::unique_ptr<http::Worker> worker;
  std::thread thread;
};

// config_version: the file's identity noted before it was read, so a change made while the proxy
// starts (before the watch loop runs) still triggers a reload.
int run_proxy(config::Config loaded, const std::string& config_path, std::optional<FileVersion> config_version) {
  const unsigned workers = loaded.workers != 0 ? loaded.workers : std::max(1u, std::thread::hardware_concurrency());
  const auto drain_timeout = loaded.drain_timeout;
  log::set_min_level(to_log_level(loaded.log.level));
  TlsFileVersions tls_files_seen = tls_file_versions(loaded.tls);  // noted before the files are read
  tls::ListenerTlsResult listener_tls = load_listener_tls_logged(loaded.tls);
  if (!listener_tls.error.empty()) {
    log::error("startup_failed", {{"error", listener_tls.error}});
    return 1;
  }
  auto runtime = std::make_shared<const http::RuntimeConfig>(std::move(loaded), std::move(listener_tls.tls));
  const config::Config& config = runtime->config;
  // The current snapshot, read by the admin thread; workers get theirs posted on reload.
  std::mutex current_mutex;
  std::shared_ptr<const http::RuntimeConfig> current = runtime;
  std::atomic<bool> draining_flag{false};

  // Signals are taken synchronously by the main thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::atomic<std::size_t> waiting_duplicates{0};
  std::atomic<std::size_t> client_connections{0};
  cache::ReplayCache replay_cache(config.replay_cache.max_bytes);
  http::ProxyMetrics metrics;
  if (config.store.redis.enabled()) metrics.track_redis_cache(workers);
  std::shared_ptr<const crypto::Keyring> keyring;
  if (config.store.encryption.enabled()) {
    std::vector<crypto::Keyring::Entry> keys;
    for (const auto& key : config.store.encryption.keys) keys.push_back({key.id, key.key});
    keyring = std::make_shared<const crypto::Keyring>(config.store.encryption.current_key, std::move(keys));
    log::info("store_encryption", {{"current_key", keyring->current_id()}, {"keys", keyring->size()}});
  }

  std::vector<std::unique_ptr<WorkerSlot>> slots;
  try {
    for (unsigned i = 0; i < workers; ++i) {
      auto slot = std::make_unique<WorkerSlot>();
      pg::PoolOptions pool;
      pool.dsn = session_dsn(config.store.postgres);
      pool.size = share(config.store.postgres.pool_size, workers);
      pool.connect_timeout = config.store.postgres.connect_timeout;
      pool.query_timeout = config.store.postgres.query_timeout;
      pool.acquire_timeout = config.store.postgres.acquire_timeout;
      pool.prepared_statements = config.store.postgres.prepared_statements;
      slot->store = std::make_unique<store::pg::PgStore>(slot->io, pool);
      if (keyring) slot->sealed = store::make_encrypting_store(*slot->store, keyring);
      store::Store& records = slot->sealed ? *slot->sealed : *slot->store;
      if (config.store.redis.enabled()) {
        slot->shared_cache = std::make_unique<cache::RedisReplayCache>(slot->io, config.store.redis, keyring, metrics);
      }
      slot->upstream = std::make_unique<http::UpstreamPool>(
          slot->io, config.upstream, share(config.upstream.max_connections, workers), config.limits.max_response_body);
      slot->worker = std::make_unique<http::Worker>(
          slot->io, http::WorkerServices{runtime, records, *slot->upstream, slot->background, waiting_duplicates, client_connections,
                                     replay_cache, metrics, slot->shared_cache.get()});
      slots.push_back(std::move(slot));
    }
  } catch (const std::exception& e) {
    log::error("startup_failed", {{"error", e.what()}, {"listen", config.listen.host + ":" + std::to_string(config.listen.port)}});
    return 1;
  }

  // One reaper per process, on the first worker's thread.
  http::Reaper reaper(slots.front()->io, *slots.front()->store, config.reaper);
  reaper.start();
  register_process_metrics(metrics.registry(), replay_cache, reaper, waiting_duplicates, client_connections,
                           draining_flag, config);
  // Reloads run on this thread only; the metrics are read from the admin thread.
  std::atomic<std::uint64_t> reloads_applied{0};
  std::atomic<std::uint64_t> reloads_rejected{0};
  metrics.registry().add_callback("idemproxy_config_reloads_applied_total", "Configuration reloads put in force.",
                                  "counter", [&reloads_applied] { return static_cast<double>(reloads_applied.load()); });
  metrics.registry().add_callback("idemproxy_config_reloads_rejected_total",
                                  "Configuration reloads refused (the running configuration stayed in force).", "counter",
                                  [&reloads_rejected] { return static_cast<double>(reloads_rejected.load()); });

  // The admin listener runs on its own thread with its own one-connection store.
  std::unique_ptr<admin::AdminServer> admin_server;
  std::unique_ptr<store::pg::PgStore> admin_store;
  if (config.admin.enabled) {
    try {
      admin_server = std::make_unique<admin::AdminServer>(config.admin.host, config.admin.port, config.admin.token);
    } catch (const std::exception& e) {
      log::error("startup_failed", {{"error", e.what()}, {"admin_listen", config.admin.host + ":" + std::to_string(config.admin.port)}});
      return 1;
    }
    pg::PoolOptions pool;
    pool.dsn = session_dsn(config.store.postgres);
    pool.size = 1;
    pool.connect_timeout = config.store.postgres.connect_timeout;
    pool.query_timeout = config.store.postgres.query_timeout;
    pool.acquire_timeout = config.store.postgres.acquire_timeout;
    admin_store = std::make_unique<store::pg::PgStore>(admin_server->io(), pool);
    admin_store->start();
    admin_server->start(app::make_proxy_admin_handler(app::ProxyAdminContext{
        [&current_mutex, &current] {
          std::lock_guard lock(current_mutex);
          return current;
        },
        metrics.registry(), draining_flag, *admin_store}));
    log::info("admin_listening", {{"address", config.admin.host + ":" + std::to_string(admin_server->port())}});
  }

  std::atomic<unsigned> running{workers};
  for (auto& slot : slots) {
    slot->store->start();
    if (slot->shared_cache) slot->shared_cache->start();
    slot->worker->start();
    slot->thread = std::thread([&slot = *slot, &running] {
      slot.io.run();
      running.fetch_sub(1);
    });
  }
  log::info("listening", {{"address", config.listen.host + ":" + std::to_string(config.listen.port)},
                          {"workers", workers}, {"upstream", config.upstream.url}, {"version", IDEMPROXY_VERSION}});

  auto config_mtime = config_version;
  // An invalid new file is logged issue by issue and the running configuration kept.
  auto reload = [&](std::string_view trigger) {
    std::shared_ptr<const http::RuntimeConfig> running;
    {
      std::lock_guard lock(current_mutex);
      running = current;
    }
    // Checked against the running upstream and store: those sections only change on a restart.
    const config::LoadResult loaded_again =
        config::load_config_file(config_path, config::process_environment(), &running->config);
    for (const auto& issue : loaded_again.issues) {
      log::write(issue.warning ? log::Level::warn : log::Level::error, "config_issue", {{"issue", issue.to_string()}});
    }
    if (!loaded_again.config) {
      reloads_rejected.fetch_add(1);
      log::error("reload_rejected", {{"trigger", trigger}, {"errors", loaded_again.issues.size()}});
      return;
    }
    // Noted before the files are read: a change after this point triggers another reload.
    tls_files_seen = tls_file_versions(loaded_again.config->tls);
    // Read again even when the paths are unchanged: the files may hold a renewed certificate.
    tls::ListenerTlsResult next_tls = load_listener_tls_logged(loaded_again.config->tls);
    if (!next_tls.error.empty()) {
      log::error("config_issue", {{"issue", config_path + ": " + next_tls.error}});
      reloads_rejected.fetch_add(1);
      log::error("reload_rejected", {{"trigger", trigger}, {"errors", 1}});
      return;
    }
    if (loaded_again.config->tls.enabled() != running->config.tls.enabled()) {
      log::warn("listener_tls_switched", {{"tls", loaded_again.config->tls.enabled() ? "on" : "off"},
                                         {"applies_to", "new connections"}});
    }
    auto next = std::make_shared<const http::RuntimeConfig>(keep_restart_only_sections(*loaded_again.config, running->config),
                                                            std::move(next_tls.tls));
    log::set_min_level(to_log_level(next->config.log.level));
    {
      std::lock_guard lock(current_mutex);
      current = next;
    }
    for (auto& slot : slots) slot->worker->update_config(next);
    reloads_applied.fetch_add(1);
    log::info("reloaded", {{"trigger", trigger}, {"routes", next->config.routes.size()}});
  };

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
      draining_flag.store(true);
      drain_deadline = std::chrono::steady_clock::now() + drain_timeout;
      log::info("draining", {{"signal", sig}, {"drain_timeout_ms", static_cast<std::int64_t>(drain_timeout.count())}});
      for (auto& slot : slots) {
        const bool reaps = slot == slots.front();
        slot->worker->drain([store = slot->store.get(), shared_cache = slot->shared_cache.get(), reaps, &reaper] {
          if (reaps) reaper.stop();
          if (shared_cache) shared_cache->stop();  // its reconnect timer would keep io.run() going
          store->stop();
        });
      }
    }
    const auto mtime = modified_time(config_path);
    const TlsFileVersions tls_files = tls_file_versions(current->config.tls);  // only this thread writes `current`
    const bool file_changed = mtime && mtime != config_mtime;
    const bool tls_files_changed = tls_files != tls_files_seen;
    if (!draining && (sig == SIGHUP || file_changed || tls_files_changed)) {
      config_mtime = mtime;
      tls_files_seen = tls_files;  // a rejected reload is not retried until the next change
      reload(sig == SIGHUP ? "signal" : file_changed ? "file_changed" : "tls_files_changed");
    }
    if (draining && std::chrono::steady_clock::now() > drain_deadline) {
      // Requests still running lose their answer; their records stay in flight and their
      // leases decide what a retry gets.
      log::error("drain_timeout", {{"drain_timeout_ms", static_cast<std::int64_t>(drain_timeout.count())}});
      std::_Exit(1);
    }
  }
  for (auto& slot : slots) slot->thread.join();
  if (admin_server) admin_server->stop();
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

  const std::optional<FileVersion> config_version = modified_time(options->config_path);
  const config::LoadResult loaded = config::load_config_file(options->config_path);
  for (const auto& issue : loaded.issues) std::cerr << issue.to_string() << "\n";
  if (!loaded.config) return 1;
  if (options->check) {
    const std::vector<std::string> tls_issues = tls_problems(*loaded.config);
    for (const auto& issue : tls_issues) std::cerr << options->config_path << ": " << issue << "\n";
    if (!tls_issues.empty()) return 1;
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
  return run_proxy(*loaded.config, options->config_path, config_version);
}
