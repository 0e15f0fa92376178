#include "app/proxy_process.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "admin/admin_server.hpp"
#include "config/config_loader.hpp"
#include "config/key_space_changes.hpp"
#include "app/proxy_admin.hpp"
#include "app/proxy_options.hpp"
#include "cache/redis_replay_cache.hpp"
#include "crypto/keyring.hpp"
#include "http/unix_listener.hpp"
#include "http/upstream_pool.hpp"
#include "http/worker.hpp"
#include "log/log.hpp"
#include "pg/counters.hpp"
#include "pg/replication_watch.hpp"
#include "store/encrypting_store.hpp"
#include "store/pg/pg_store.hpp"
#include "store/reaper.hpp"
#include "tls/tls_context.hpp"

namespace idem::app {

// Everything one io thread owns. Member order is destruction order reversed: the io_context
// outlives every object that registered with it.
struct WorkerSlot {
  // One thread runs it and only that thread touches its sockets and timers (other threads post):
  // no per-descriptor locking (two mutex round trips per I/O operation otherwise).
  boost::asio::io_context io{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::unique_ptr<store::pg::PgStore> store;
  std::unique_ptr<store::Store> sealed;  // the encrypting decorator over `store`, when keys are configured
  std::unique_ptr<cache::RedisReplayCache> shared_cache;       // store.redis: this worker's own connection
  std::vector<std::unique_ptr<http::UpstreamPool>> upstreams;  // config.upstreams' order
  http::BackgroundTasks background;
  std::unique_ptr<http::Worker> worker;
  std::thread thread;
};

namespace {

unsigned worker_count(const config::Config& config) {
  return config.workers != 0 ? config.workers : std::max(1u, std::thread::hardware_concurrency());
}

std::size_t share(std::size_t total, unsigned parts) { return std::max<std::size_t>(1, (total + parts - 1) / parts); }

// The listener's TLS context from its files, read now (no context and no error without TLS),
// with a log line naming the certificate it serves.
tls::ListenerTlsResult load_listener_tls_logged(const config::ListenerTlsConfig& listener) {
  if (!listener.enabled()) return {};
  tls::ListenerTlsResult loaded = tls::load_listener_tls(listener);
  if (!loaded.tls) return loaded;
  const tls::CertificateSummary& certificate = loaded.tls->certificate;
  log::write(certificate.expired ? log::Level::warn : log::Level::info, "tls_certificate_loaded",
             {{"cert_file", listener.cert_file},
              {"subject", certificate.subject},
              {"serial", certificate.serial},
              {"not_after", certificate.not_after},
              {"expired", certificate.expired ? "true" : "false"}});
  return loaded;
}

std::shared_ptr<const crypto::Keyring> load_keyring(const config::EncryptionConfig& encryption) {
  if (!encryption.enabled()) return nullptr;
  std::vector<crypto::Keyring::Entry> keys;
  for (const auto& key : encryption.keys) keys.push_back({key.id, key.key});
  auto keyring = std::make_shared<const crypto::Keyring>(encryption.current_key, std::move(keys));
  log::info("store_encryption", {{"current_key", keyring->current_id()}, {"keys", keyring->size()}});
  return keyring;
}

std::string address(const std::string& host, unsigned port) { return host + ":" + std::to_string(port); }

// "127.0.0.1:8080", "127.0.0.1:8080, unix:/run/app/idemproxy.sock" or "unix:/run/...".
std::string listen_addresses(const config::ListenConfig& listen) {
  std::string text = listen.tcp ? address(listen.host, listen.port) : std::string();
  if (!listen.unix_socket.empty()) text += (text.empty() ? "unix:" : ", unix:") + listen.unix_socket;
  return text;
}

// "http://127.0.0.1:3000" for the one upstream; "api=http://…, reports=unix:/…" for several.
std::string upstream_urls(const config::Config& config) {
  if (config.upstreams.size() == 1) return config.upstreams.front().url;
  std::string urls;
  for (const config::UpstreamConfig& upstream : config.upstreams)
    urls += (urls.empty() ? "" : ", ") + upstream.name + "=" + upstream.url;
  return urls;
}

}  // namespace

ProxyProcess::ProxyProcess() = default;

ProxyProcess::~ProxyProcess() {
  for (auto& slot : slots_) {
    if (slot->thread.joinable()) slot->thread.join();
  }
}

std::unique_ptr<ProxyProcess> ProxyProcess::start(config::Config loaded) {
  log::set_min_level(log_level(loaded.log.level));
  tls::ListenerTlsResult listener_tls = load_listener_tls_logged(loaded.tls);
  if (!listener_tls.error.empty()) {
    log::error("startup_failed", {{"error", listener_tls.error}});
    return nullptr;
  }
  std::unique_ptr<ProxyProcess> process(new ProxyProcess());
  process->config_ = std::make_shared<const config::Config>(std::move(loaded));
  if (!process->build(
          std::make_shared<const http::RuntimeConfig>(proxy_options(*process->config_), std::move(listener_tls.tls)))) {
    return nullptr;
  }
  if (!process->start_admin()) return nullptr;
  const config::Config& config = process->config();
  process->running_threads_.store(static_cast<unsigned>(process->slots_.size()));
  for (auto& slot : process->slots_) {
    slot->store->start();
    if (slot->shared_cache) slot->shared_cache->start();
    slot->worker->start();
    slot->thread = std::thread([&slot = *slot, &running = process->running_threads_] {
      slot.io.run();
      running.fetch_sub(1);
    });
  }
  log::info("listening", {{"address", listen_addresses(config.listen)},
                          {"workers", process->slots_.size()},
                          {"upstream", upstream_urls(config)},
                          {"version", IDEMPROXY_VERSION}});
  return process;
}

bool ProxyProcess::build(std::shared_ptr<const http::RuntimeConfig> runtime) {
  current_ = std::move(runtime);
  const config::Config& config = *config_;
  const unsigned workers = worker_count(config);
  replay_cache_ = std::make_unique<cache::ReplayCache>(config.replay_cache.max_bytes);
  if (config.store.redis.enabled()) metrics_.track_redis_cache(workers);
  const std::shared_ptr<const crypto::Keyring> keyring = load_keyring(config.store.encryption);
  try {
    if (!config.listen.unix_socket.empty())
      unix_listener_ = std::make_unique<http::UnixListener>(config.listen.unix_socket);
    for (unsigned i = 0; i < workers; ++i) {
      auto slot = std::make_unique<WorkerSlot>();
      slot->store = std::make_unique<store::pg::PgStore>(
          slot->io, store_pool_options(config.store.postgres, share(config.store.postgres.pool_size, workers)));
      if (keyring) slot->sealed = store::make_encrypting_store(*slot->store, keyring);
      store::Store& records = slot->sealed ? *slot->sealed : *slot->store;
      if (config.store.redis.enabled()) {
        slot->shared_cache = std::make_unique<cache::RedisReplayCache>(
            slot->io, redis_cache_options(config.store.redis), keyring, metrics_);
      }
      std::vector<http::Upstream*> upstreams;
      for (const config::UpstreamConfig& upstream : config.upstreams) {
        slot->upstreams.push_back(std::make_unique<http::UpstreamPool>(slot->io, upstream_options(upstream),
                                                                       share(upstream.max_connections, workers)));
        upstreams.push_back(slot->upstreams.back().get());
      }
      slot->worker =
          std::make_unique<http::Worker>(slot->io,
                                         http::WorkerServices{current_, records, std::move(upstreams), slot->background,
                                                              waiting_duplicates_, client_connections_, *replay_cache_,
                                                              metrics_, pending_settlements_, slot->shared_cache.get()},
                                         unix_listener_ ? unix_listener_->fd() : -1);
      slots_.push_back(std::move(slot));
    }
  } catch (const std::exception& e) {
    log::error("startup_failed", {{"error", e.what()}, {"listen", listen_addresses(config.listen)}});
    return false;
  }
  // One reaper per process, on the first worker's thread.
  reaper_ = std::make_unique<store::Reaper>(slots_.front()->io, *slots_.front()->store, reaper_options(config.reaper));
  reaper_->start();
  // Which replication the primary runs: read once the first worker's pool is up, then every 5 seconds
  // and on every reload (the read goes through that worker's pool: nothing blocks).
  store::pg::PgStore* reader_store = slots_.front()->store.get();
  replication_watch_ = std::make_shared<pg::ReplicationWatch>(
      slots_.front()->io,
      [reader_store](pg::ReplicationSettingsHandler handler) {
        reader_store->read_replication_settings(std::move(handler));
      },
      store_synchronous_replication_);
  boost::asio::post(slots_.front()->io, [watch = replication_watch_] { watch->start(); });
  register_process_metrics();
  return true;
}

// The admin listener runs on its own thread with its own one-connection store.
bool ProxyProcess::start_admin() {
  const config::Config& config = *config_;
  if (!config.admin.enabled) return true;
  try {
    admin_server_ = std::make_unique<admin::AdminServer>(config.admin.host, config.admin.port, config.admin.token);
  } catch (const std::exception& e) {
    log::error("startup_failed",
               {{"error", e.what()}, {"admin_listen", address(config.admin.host, config.admin.port)}});
    return false;
  }
  admin_store_ =
      std::make_unique<store::pg::PgStore>(admin_server_->io(), store_pool_options(config.store.postgres, 1));
  admin_store_->start();
  admin_server_->start(make_proxy_admin_handler(ProxyAdminContext{[this] {
                                                                    std::lock_guard lock(current_mutex_);
                                                                    return current_;
                                                                  },
                                                                  metrics_.registry(), draining_, *admin_store_}));
  log::info("admin_listening", {{"address", address(config.admin.host, admin_server_->port())}});
  return true;
}

void ProxyProcess::reload(std::string_view trigger, ConfigWatcher& watcher) {
  const std::shared_ptr<const config::Config> running = config_;  // only this thread writes it
  // Checked against the running upstream and store: those sections only change on a restart.
  const config::LoadResult loaded =
      config::load_config_file(watcher.config_path(), config::process_environment(), running.get());
  for (const auto& issue : loaded.issues) {
    log::write(issue.warning ? log::Level::warn : log::Level::error, "config_issue", {{"issue", issue.to_string()}});
  }
  if (!loaded.config) {
    reloads_rejected_.fetch_add(1);
    log::error("reload_rejected", {{"trigger", trigger}, {"errors", loaded.issues.size()}});
    return;
  }
  watcher.note_tls_files(loaded.config->tls);
  // Read again even when the paths are unchanged: the files may hold a renewed certificate.
  tls::ListenerTlsResult next_tls = load_listener_tls_logged(loaded.config->tls);
  if (!next_tls.error.empty()) {
    log::error("config_issue", {{"issue", watcher.config_path() + ": " + next_tls.error}});
    reloads_rejected_.fetch_add(1);
    log::error("reload_rejected", {{"trigger", trigger}, {"errors", 1}});
    return;
  }
  if (loaded.config->tls.enabled() != running->tls.enabled()) {
    log::warn("listener_tls_switched",
              {{"tls", loaded.config->tls.enabled() ? "on" : "off"}, {"applies_to", "new connections"}});
  }
  // Retries that straddle this reload on these routes execute again: said once more as its own
  // event, for alerts (the config_issue warnings above say where in the file).
  for (const config::KeySpaceChange& change : config::key_space_changes(running->routes, loaded.config->routes)) {
    log::warn("key_space_changed", {{"route", change.route}, {"change", change.change}});
  }
  // The restart-only settings (config.hpp marks them) keep their running values.
  for (const auto& name : config::restart_only_changes(*running, *loaded.config)) {
    log::warn("reload_needs_restart", {{"section", name}});
  }
  config_ = std::make_shared<const config::Config>(config::keep_restart_only(*loaded.config, *running));
  auto next = std::make_shared<const http::RuntimeConfig>(proxy_options(*config_), std::move(next_tls.tls));
  log::set_min_level(log_level(config_->log.level));
  {
    std::lock_guard lock(current_mutex_);
    current_ = next;
  }
  for (auto& slot : slots_) slot->worker->update_config(next);
  boost::asio::post(slots_.front()->io, [watch = replication_watch_] { watch->refresh(); });
  reloads_applied_.fetch_add(1);
  log::info("reloaded", {{"trigger", trigger}, {"routes", config_->routes.size()}});
}

void ProxyProcess::drain() {
  draining_.store(true);
  // The socket stops listening once each worker closed its duplicate too (Worker::drain): a new
  // client is refused at once rather than queued until the drain ends.
  if (unix_listener_) unix_listener_->close();
  for (auto& slot : slots_) {
    const bool first = slot == slots_.front();
    store::Reaper* reaper = first ? reaper_.get() : nullptr;
    pg::ReplicationWatch* watch = first ? replication_watch_.get() : nullptr;
    slot->worker->drain([store = slot->store.get(), shared_cache = slot->shared_cache.get(), reaper, watch] {
      if (reaper != nullptr) reaper->stop();
      if (watch != nullptr) watch->stop();     // its timer would keep io.run() going
      if (shared_cache) shared_cache->stop();  // its reconnect timer would keep io.run() going
      store->stop();
    });
  }
}

void ProxyProcess::stop() {
  for (auto& slot : slots_) slot->thread.join();
  if (admin_server_) admin_server_->stop();
}

void ProxyProcess::register_process_metrics() {
  metrics::Registry& registry = metrics_.registry();
  const cache::ReplayCache& cache = *replay_cache_;
  const store::Reaper& reaper = *reaper_;
  auto& counters = pg::pg_counters();
  auto number = [](auto value) { return static_cast<double>(value); };
  registry.add_callback("idemproxy_replay_cache_hits_total", "Replays answered from the in-process cache.", "counter",
                        [&cache, number] { return number(cache.hits()); });
  registry.add_callback("idemproxy_replay_cache_misses_total", "Keyed requests the in-process cache could not answer.",
                        "counter", [&cache, number] { return number(cache.misses()); });
  registry.add_callback("idemproxy_replay_cache_bytes", "Bytes held by the in-process replay cache.", "gauge",
                        [&cache, number] { return number(cache.bytes()); });
  registry.add_callback("idemproxy_reaper_deleted_total", "Expired records deleted by this process's reaper.",
                        "counter", [&reaper, number] { return number(reaper.deleted_total()); });
  registry.add_callback("idemproxy_reaper_failures_total", "Reaper sweeps the store refused or did not answer.",
                        "counter", [&reaper, number] { return number(reaper.failures_total()); });
  registry.add_callback("idemproxy_waiting_duplicates", "Duplicates waiting for their first request (in_flight: wait).",
                        "gauge", [this, number] { return number(waiting_duplicates_.load()); });
  registry.add_callback("idemproxy_client_connections", "Client connections open.", "gauge",
                        [this, number] { return number(client_connections_.load()); });
  registry.add_callback("idemproxy_draining", "1 from the moment a shutdown signal arrives.", "gauge",
                        [this] { return draining_.load() ? 1.0 : 0.0; });
  const double pool_size = static_cast<double>(config_->store.postgres.pool_size);
  registry.add_callback("idemproxy_pg_pool_size", "Postgres connections this process keeps (all workers).", "gauge",
                        [pool_size] { return pool_size; });
  registry.add_callback("idemproxy_pg_pool_waits_total", "Statements that queued for a busy Postgres pool.", "counter",
                        [&counters, number] { return number(counters.acquire_waits.load()); });
  registry.add_callback("idemproxy_pg_pool_wait_timeouts_total",
                        "Statements that found no free Postgres connection within acquire_timeout.", "counter",
                        [&counters, number] { return number(counters.acquire_timeouts.load()); });
  registry.add_callback("idemproxy_pg_statements_total", "Statements sent to Postgres (round trips).", "counter",
                        [&counters, number] { return number(counters.statements_sent.load()); });
  registry.add_callback("idemproxy_pg_prepared_statements_lost_total",
                        "Statements a Postgres session no longer held (or a transaction pooler's next server session "
                        "never did), run again unnamed: steadily rising behind PgBouncer before 1.21 means "
                        "prepared_statements: false.",
                        "counter", [&counters, number] { return number(counters.prepared_statements_lost.load()); });
  registry.add_callback("idemproxy_pg_connects_failed_total", "Failed Postgres connection attempts.", "counter",
                        [&counters, number] { return number(counters.connects_failed.load()); });
  registry.add_callback("idemproxy_pg_query_timeouts_total", "Postgres statements that passed query_timeout.",
                        "counter", [&counters, number] { return number(counters.query_timeouts.load()); });
  registry.add_callback("idemproxy_store_synchronous_replication",
                        "1 when the store's primary replicates synchronously (an acknowledged commit survives a "
                        "failover), 0 when not (a failover can lose one: a retry may execute again), -1 until known.",
                        "gauge", [this] { return static_cast<double>(store_synchronous_replication_.load()); });
  // Reloads run on the main thread only; the metrics are read from the admin thread.
  registry.add_callback("idemproxy_config_reloads_applied_total", "Configuration reloads put in force.", "counter",
                        [this] { return static_cast<double>(reloads_applied_.load()); });
  registry.add_callback("idemproxy_config_reloads_rejected_total",
                        "Configuration reloads refused (the running configuration stayed in force).", "counter",
                        [this] { return static_cast<double>(reloads_rejected_.load()); });
}

}  // namespace idem::app
