#pragma once
// What a worker's request handling needs: the current configuration snapshot, the worker's own
// store and upstream pool, and the bookkeeping a graceful drain waits on. All of it belongs to
// one io thread, except the process-wide counter of waiting duplicates.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/route_table.hpp"
#include "http/proxy_options.hpp"

namespace idem::store {
class Store;
}
namespace idem::tls {
struct ListenerTls;
}  // namespace idem::tls
namespace idem::cache {
class ReplayCache;
class SharedReplayCache;
}  // namespace idem::cache

namespace idem::http {

class Upstream;
class PendingSettlements;
class ProxyMetrics;

// Where one request goes and what bounds its exchange: its route's settings, else its upstream's
// and the limits' (core::RouteForwarding).
struct ForwardingTerms {
  std::size_t upstream = 0;                          // index into WorkerServices::upstreams (config.upstreams' order)
  std::chrono::milliseconds timeout{0};              // the answer's head
  std::chrono::milliseconds stream_idle_timeout{0};  // each silence of a streamed answer's body
  std::size_t max_request_body = 0;
};

// An immutable configuration snapshot. Requests hold a shared_ptr to the one they started with,
// so a reload never changes the rules under a request in progress.
struct RuntimeConfig {
  ProxyOptions options;
  core::RouteTable routes;
  // The listener's TLS context, built from config.tls's files with this snapshot (null: plain
  // HTTP). A connection keeps the one current when it was accepted.
  std::shared_ptr<tls::ListenerTls> listener_tls;
  // The largest body any route accepts: the head's Content-Length is checked against it before
  // the request is routed, then against its route's own.
  std::size_t largest_request_body = 0;
  bool routes_by_host = false;  // some route matches on Host: the field is looked up per request
  const std::string& problem_docs_url() const { return options.problem_docs_url; }
  explicit RuntimeConfig(ProxyOptions given, std::shared_ptr<tls::ListenerTls> tls = nullptr);

  ForwardingTerms terms_for(const core::Route* route) const;
};

// Work that outlives the request that started it (a completion write retried in the background).
// A draining worker waits until there is none left.
class BackgroundTasks {
 public:
  void started() { ++count_; }
  void finished() {
    if (--count_ == 0 && on_idle_) on_idle_();
  }
  std::size_t count() const { return count_; }
  void on_idle(std::function<void()> callback) { on_idle_ = std::move(callback); }

 private:
  std::size_t count_ = 0;
  std::function<void()> on_idle_;
};

struct WorkerServices {
  std::shared_ptr<const RuntimeConfig> config;
  store::Store& store;
  std::vector<Upstream*> upstreams;  // one per config.upstreams, in its order (restart-only)
  BackgroundTasks& background;
  std::atomic<std::size_t>& waiting;                 // duplicates currently waiting, across all workers
  std::atomic<std::size_t>& connections;             // client connections open, across all workers
  cache::ReplayCache& cache;                         // shared by all workers
  ProxyMetrics& metrics;                             // shared by all workers
  PendingSettlements& pending_settlements;           // keys with an owner write retried in the background, all workers
  cache::SharedReplayCache* shared_cache = nullptr;  // this worker's Redis replay cache; null when off
};

}  // namespace idem::http
