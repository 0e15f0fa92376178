#pragma once
// The running idemproxy: one worker per io thread (each with its own Postgres pool slice, Redis
// connection and upstream pool), the process-wide replay cache and metrics, the reaper, the admin
// listener, and the configuration snapshot in force. The one place that picks implementations.
//
// Built, reloaded and drained from the main thread only (which also takes the signals); the
// workers run on their own threads, the admin listener on its own.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "app/config_watcher.hpp"
#include "cache/replay_cache.hpp"
#include "config/config.hpp"
#include "http/pending_settlements.hpp"
#include "http/proxy_metrics.hpp"
#include "http/runtime.hpp"

namespace idem::admin {
class AdminServer;
}
namespace idem::store {
class Reaper;
}
namespace idem::store::pg {
class PgStore;
}
namespace idem::http {
class UnixListener;
}  // namespace idem::http
namespace idem::pg {
class ReplicationWatch;
}

namespace idem::app {

struct WorkerSlot;  // proxy_process.cpp

class ProxyProcess {
 public:
  // Loads the listener's TLS files, builds every worker, binds the listen and admin addresses and
  // starts the threads. Null after logging `startup_failed` when any of it fails.
  static std::unique_ptr<ProxyProcess> start(config::Config loaded);
  ~ProxyProcess();
  ProxyProcess(const ProxyProcess&) = delete;
  ProxyProcess& operator=(const ProxyProcess&) = delete;

  // Reads the configuration file again and puts it in force for requests that start after this
  // (restart-only settings keep their running values and are named in a warning). An invalid file
  // or TLS files that do not load are logged issue by issue, and the running configuration stays.
  void reload(std::string_view trigger, ConfigWatcher& watcher);

  // Graceful stop: no new connections, requests in progress finish, background writes settle;
  // then each worker's io thread returns. idle() says when all have.
  void drain();
  bool idle() const { return running_threads_.load() == 0; }
  // After idle(): joins the threads and stops the admin listener.
  void stop();

  // The snapshot in force (the main thread is its only writer).
  const config::Config& config() const { return *config_; }

 private:
  ProxyProcess();
  bool build(std::shared_ptr<const http::RuntimeConfig> runtime);
  bool start_admin();
  void register_process_metrics();

  std::mutex current_mutex_;                            // the admin thread reads current_
  std::shared_ptr<const http::RuntimeConfig> current_;  // what the workers serve with (http/ options)
  std::shared_ptr<const config::Config> config_;        // the configuration in force; this thread only
  std::atomic<bool> draining_{false};
  std::atomic<std::size_t> waiting_duplicates_{0};
  std::atomic<std::size_t> client_connections_{0};
  std::atomic<std::uint64_t> reloads_applied_{0};
  std::atomic<std::uint64_t> reloads_rejected_{0};
  std::atomic<unsigned> running_threads_{0};
  // 1 synchronous, 0 asynchronous, -1 not known yet (pg/replication_watch.hpp).
  std::atomic<int> store_synchronous_replication_{-1};
  std::unique_ptr<cache::ReplayCache> replay_cache_;
  http::PendingSettlements pending_settlements_;
  http::ProxyMetrics metrics_;
  std::unique_ptr<http::UnixListener> unix_listener_;  // listen: unix:/path; its file goes with it
  std::vector<std::unique_ptr<WorkerSlot>> slots_;
  std::unique_ptr<store::Reaper> reaper_;
  std::shared_ptr<pg::ReplicationWatch> replication_watch_;  // on the first worker's thread, like the reaper
  std::unique_ptr<admin::AdminServer> admin_server_;
  std::unique_ptr<store::pg::PgStore> admin_store_;
};

}  // namespace idem::app
