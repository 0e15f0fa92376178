#pragma once
// The proxy's Prometheus metrics: families registered once, updated from request traces and the
// components that own the numbers (replay cache, reaper, pools) at scrape time.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>

#include "http/request_trace.hpp"
#include "cache/shared_replay_cache.hpp"
#include "metrics/registry.hpp"

namespace idem::http {

class ProxyMetrics final : public cache::SharedCacheObserver {
 public:
  ProxyMetrics();
  void record(RequestTrace& trace, unsigned status);  // also notes the route's byte counters in `trace`
  void observe_store(std::string_view operation, std::chrono::microseconds elapsed);
  void refused(unsigned status);  // requests answered before being read whole (413, 431, 400)

  // The Redis replay cache's families, registered only when store.redis is configured, before the
  // first scrape. `connections`: one per worker; idemproxy_redis_up is 1 while all are up.
  void track_redis_cache(unsigned connections);
  // Every lookup is exactly one of hit, miss, or fallback (by reason). Any thread.
  void redis_lookup(cache::SharedLookupOutcome outcome, cache::SharedFallbackReason reason) override;
  void redis_write(bool acknowledged) override;  // a SET Redis answered OK, or one that failed
  void redis_connection_up(bool up) override;    // a worker's connection became ready, or stopped being

  metrics::Registry& registry() { return registry_; }
  std::atomic<std::int64_t> in_flight_records{0};  // claims this process holds while executing

  // Streams: once per exchange, at its end, the body bytes it moved (by route) and a streamed
  // body cut short (by side and cause); and the streamed exchanges in progress (ActiveStream).
  void record_bodies(const RequestTrace& trace);
  std::atomic<std::int64_t> active_streams{0};
  std::atomic<std::int64_t> active_tunnels{0};  // of which upgraded to a tunnel (ActiveStream too)

 private:
  // The registry's children a request updates, looked up once per thread and label set
  // (proxy_metrics.cpp): the registry's own lookup takes a lock and builds label vectors.
  struct RequestChildren;
  RequestChildren& request_children(std::string_view route, std::string_view decision);
  void find_body_bytes(RequestChildren& children);
  metrics::Histogram& store_histogram(std::string_view operation);

  metrics::Registry registry_;
  const std::uint64_t id_;                                     // tells this registry's cached children from another's
  std::atomic<metrics::Counter*> responses_by_class_[6] = {};  // by status / 100, created on first use
  // Children looked up once (see registry.hpp); null until track_redis_cache.
  metrics::Counter* redis_hits_ = nullptr;
  metrics::Counter* redis_misses_ = nullptr;
  metrics::Counter* redis_fallbacks_[4] = {};  // by cache::SharedFallbackReason
  metrics::Counter* redis_writes_ = nullptr;
  metrics::Counter* redis_write_errors_ = nullptr;
  std::atomic<int> redis_connections_up_{0};
  metrics::Counter* bodies_aborted_[2][2] = {};  // [upstream][timeout], created with the registry
};

// Counts one streamed exchange in idemproxy_active_streams (or one tunnel in
// idemproxy_active_tunnels) while it lives (a coroutine's local: its end, however it ends, is the
// stream's).
class ActiveStream {
 public:
  explicit ActiveStream(ProxyMetrics& metrics) : ActiveStream(metrics.active_streams) {}
  explicit ActiveStream(std::atomic<std::int64_t>& count) : count_(count) {
    count_.fetch_add(1, std::memory_order_relaxed);
  }
  ~ActiveStream() { count_.fetch_sub(1, std::memory_order_relaxed); }
  ActiveStream(const ActiveStream&) = delete;
  ActiveStream& operator=(const ActiveStream&) = delete;

 private:
  std::atomic<std::int64_t>& count_;
};

}  // namespace idem::http
