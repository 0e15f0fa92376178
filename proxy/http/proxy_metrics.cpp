#include "http/proxy_metrics.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <vector>

namespace idem::http {
namespace {

std::atomic<std::uint64_t> next_metrics_id{1};

// Beyond this many label sets a thread stops caching and asks the registry each time (an
// unbounded number of routes would otherwise grow the cache without bound).
constexpr std::size_t kCachedLabelSets = 64;

}  // namespace

struct ProxyMetrics::RequestChildren {
  std::uint64_t metrics_id = 0;
  std::string route;
  std::string decision;
  metrics::Counter* requests = nullptr;
  metrics::Histogram* upstream = nullptr;                  // created with the route's first upstream exchange
  metrics::Histogram* added = nullptr;                     // proxy-added latency of the route
  std::array<metrics::Histogram*, 6> duration_by_class{};  // whole request, by status / 100
  std::array<metrics::Counter*, 2> replays{};              // by cache_hit (local or from the store)
  metrics::Counter* request_body_bytes = nullptr;          // the route's (one pair for all its decisions)
  metrics::Counter* response_body_bytes = nullptr;
};

ProxyMetrics::RequestChildren& ProxyMetrics::request_children(std::string_view route, std::string_view decision) {
  // Per thread: each worker reads and extends its own list without a lock. Entries of a registry
  // since destroyed are never matched again (ids are not reused).
  thread_local std::vector<RequestChildren> cached;
  for (RequestChildren& children : cached) {
    if (children.metrics_id == id_ && children.decision == decision && children.route == route) return children;
  }
  RequestChildren children{
      id_, std::string(route), std::string(decision), nullptr, nullptr, nullptr, {}, {}, nullptr, nullptr};
  children.requests = &registry_.counter("idemproxy_requests_total", {children.route, children.decision});
  if (cached.size() >= kCachedLabelSets) {
    std::erase_if(cached, [this](const RequestChildren& entry) { return entry.metrics_id != id_; });
  }
  if (cached.size() >= kCachedLabelSets) {
    thread_local RequestChildren uncached;
    uncached = std::move(children);
    return uncached;
  }
  cached.push_back(std::move(children));
  return cached.back();
}

metrics::Histogram& ProxyMetrics::store_histogram(std::string_view operation) {
  struct StoreChild {
    std::uint64_t metrics_id;
    std::string operation;
    metrics::Histogram* histogram;
  };
  thread_local std::vector<StoreChild> cached;
  for (const StoreChild& child : cached) {
    if (child.metrics_id == id_ && child.operation == operation) return *child.histogram;
  }
  metrics::Histogram& histogram = registry_.histogram("idemproxy_store_duration_seconds", {std::string(operation)});
  if (cached.size() >= kCachedLabelSets) {
    std::erase_if(cached, [this](const StoreChild& entry) { return entry.metrics_id != id_; });
  }
  if (cached.size() < kCachedLabelSets) cached.push_back({id_, std::string(operation), &histogram});
  return histogram;
}

ProxyMetrics::ProxyMetrics() : id_(next_metrics_id.fetch_add(1)) {
  registry_.add_counter("idemproxy_requests_total", "Requests by route and idempotency decision.",
                        {"route", "decision"});
  registry_.add_counter("idemproxy_responses_total", "Responses by status class.", {"class"});
  registry_.add_histogram("idemproxy_upstream_duration_seconds",
                          "Time from writing a request upstream to its full response.", {"route"});
  registry_.add_histogram("idemproxy_store_duration_seconds", "Store (Postgres) operation latency, queueing included.",
                          {"operation"});
  // The two the SLOs are written on (deploy/monitoring): every request read whole, by the class of
  // its answer, and the part of its time the proxy added to the upstream's.
  registry_.add_histogram("idemproxy_request_duration_seconds",
                          "Time from reading a request whole to its response being ready, by route and status class.",
                          {"route", "class"});
  registry_.add_counter("idemproxy_replays_total",
                        "Stored responses replayed, by route and where the record came from: local (this "
                        "process's cache), redis, postgres.",
                        {"route", "source"});
  registry_.add_histogram("idemproxy_added_latency_seconds",
                          "Time the proxy added to a request: its whole handling minus the upstream exchange.",
                          {"route"});
  registry_.add_callback("idemproxy_in_flight_records", "Idempotency records this process holds in flight right now.",
                         "gauge", [this] { return static_cast<double>(in_flight_records.load()); });

  // Streams (README "Streaming"): what bodies moved, how many are moving, which side cut one short.
  registry_.add_counter("idemproxy_request_body_bytes_total", "Request body bytes received from clients, by route.",
                        {"route"});
  registry_.add_counter("idemproxy_response_body_bytes_total", "Response body bytes sent to clients, by route.",
                        {"route"});
  registry_.add_callback("idemproxy_active_streams", "Streamed exchanges in progress.", "gauge",
                         [this] { return static_cast<double>(active_streams.load()); });
  registry_.add_callback("idemproxy_active_tunnels",
                         "Upgraded connections (WebSocket) tunnelled in progress; each is also an active stream.",
                         "gauge", [this] { return static_cast<double>(active_tunnels.load()); });
  registry_.add_counter("idemproxy_bodies_aborted_total",
                        "Streamed bodies cut short, by the side that cut them (client, upstream) and how (failed: "
                        "closed, reset or malformed; timeout: silent past its deadline).",
                        {"side", "reason"});
  for (const AbortSide side : {AbortSide::client, AbortSide::upstream}) {
    for (const AbortCause cause : {AbortCause::failed, AbortCause::timeout}) {
      bodies_aborted_[side == AbortSide::upstream][cause == AbortCause::timeout] = &registry_.counter(
          "idemproxy_bodies_aborted_total", {std::string(abort_side_name(side)), std::string(abort_cause_name(cause))});
    }
  }
}

void ProxyMetrics::find_body_bytes(RequestChildren& children) {
  if (children.request_body_bytes != nullptr) return;
  children.request_body_bytes = &registry_.counter("idemproxy_request_body_bytes_total", {children.route});
  children.response_body_bytes = &registry_.counter("idemproxy_response_body_bytes_total", {children.route});
}

void ProxyMetrics::record(RequestTrace& trace, unsigned status) {
  RequestChildren& children = request_children(trace.route, trace.decision);
  children.requests->inc();
  find_body_bytes(children);
  trace.request_body_bytes = children.request_body_bytes;
  trace.response_body_bytes = children.response_body_bytes;
  const unsigned status_class = status / 100;
  if (status_class < std::size(responses_by_class_)) {
    metrics::Counter* counter = responses_by_class_[status_class].load(std::memory_order_acquire);
    if (counter == nullptr) {
      // Created with the class's first response; every worker that races here gets the same child.
      counter = &registry_.counter("idemproxy_responses_total", {std::to_string(status_class) + "xx"});
      responses_by_class_[status_class].store(counter, std::memory_order_release);
    }
    counter->inc();
  } else {
    registry_.counter("idemproxy_responses_total", {std::to_string(status_class) + "xx"}).inc();
  }
  if (trace.upstream.count() > 0) {
    if (children.upstream == nullptr) {
      children.upstream = &registry_.histogram("idemproxy_upstream_duration_seconds", {children.route});
    }
    children.upstream->observe_micros(trace.upstream.count());
  }
  if (trace.decision == decision::replay || trace.decision == decision::replay_redis) {
    metrics::Counter*& replays = children.replays[trace.cache_hit ? 1 : 0];
    if (replays == nullptr) {
      const char* source = trace.decision == decision::replay_redis ? "redis" : trace.cache_hit ? "local" : "postgres";
      replays = &registry_.counter("idemproxy_replays_total", {children.route, source});
    }
    replays->inc();
  }
  if (status_class < children.duration_by_class.size()) {
    metrics::Histogram*& duration = children.duration_by_class[status_class];
    if (duration == nullptr) {
      duration = &registry_.histogram("idemproxy_request_duration_seconds",
                                      {children.route, std::to_string(status_class) + "xx"});
    }
    duration->observe_micros(trace.handled.count());
  } else {
    registry_.histogram("idemproxy_request_duration_seconds", {trace.route, std::to_string(status_class) + "xx"})
        .observe_micros(trace.handled.count());
  }
  // A response whose upstream exchange overlapped nothing else the proxy did adds nothing, never
  // a negative time (the two clocks are read at different points).
  const auto added = std::max(trace.handled - trace.upstream, std::chrono::microseconds{0});
  if (children.added == nullptr) {
    children.added = &registry_.histogram("idemproxy_added_latency_seconds", {children.route});
  }
  children.added->observe_micros(added.count());
}

void ProxyMetrics::record_bodies(const RequestTrace& trace) {
  metrics::Counter* request_bytes = trace.request_body_bytes;
  metrics::Counter* response_bytes = trace.response_body_bytes;
  if (request_bytes == nullptr) {  // an exchange record() never saw (its client went away first)
    RequestChildren& children = request_children(trace.route, trace.decision);
    find_body_bytes(children);
    request_bytes = children.request_body_bytes;
    response_bytes = children.response_body_bytes;
  }
  if (trace.bodies.in > 0) request_bytes->inc(trace.bodies.in);
  if (trace.bodies.out > 0) response_bytes->inc(trace.bodies.out);
  const BodyAbort& aborted = trace.bodies.aborted;
  if (aborted.side != AbortSide::none) {
    bodies_aborted_[aborted.side == AbortSide::upstream][aborted.cause == AbortCause::timeout]->inc();
  }
}

void ProxyMetrics::observe_store(std::string_view operation, std::chrono::microseconds elapsed) {
  store_histogram(operation).observe_micros(elapsed.count());
}

void ProxyMetrics::track_redis_cache(unsigned connections) {
  registry_.add_counter("idemproxy_redis_cache_hits_total", "Replays answered from the Redis replay cache.", {});
  registry_.add_counter("idemproxy_redis_cache_misses_total",
                        "Redis replay cache lookups that found no record (the store was asked).", {});
  registry_.add_counter("idemproxy_redis_cache_fallbacks_total",
                        "Redis replay cache lookups Redis could not answer (the store was asked), by reason.",
                        {"reason"});
  registry_.add_counter("idemproxy_redis_cache_writes_total", "Finished records copied to Redis (SET acknowledged).",
                        {});
  registry_.add_counter("idemproxy_redis_cache_write_errors_total",
                        "Copies to Redis that failed (error reply, timeout, connection lost).", {});
  registry_.add_callback(
      "idemproxy_redis_up", "1 while every worker's Redis connection is up and set up.", "gauge",
      [this, connections] { return redis_connections_up_.load() >= static_cast<int>(connections) ? 1.0 : 0.0; });
  redis_hits_ = &registry_.counter("idemproxy_redis_cache_hits_total");
  redis_misses_ = &registry_.counter("idemproxy_redis_cache_misses_total");
  for (const cache::SharedFallbackReason reason :
       {cache::SharedFallbackReason::timeout, cache::SharedFallbackReason::disconnected,
        cache::SharedFallbackReason::error, cache::SharedFallbackReason::corrupt}) {
    redis_fallbacks_[static_cast<int>(reason)] =
        &registry_.counter("idemproxy_redis_cache_fallbacks_total", {std::string(shared_fallback_reason_name(reason))});
  }
  redis_writes_ = &registry_.counter("idemproxy_redis_cache_writes_total");
  redis_write_errors_ = &registry_.counter("idemproxy_redis_cache_write_errors_total");
}

void ProxyMetrics::redis_lookup(cache::SharedLookupOutcome outcome, cache::SharedFallbackReason reason) {
  if (redis_hits_ == nullptr) return;
  switch (outcome) {
    case cache::SharedLookupOutcome::hit: redis_hits_->inc(); return;
    case cache::SharedLookupOutcome::miss: redis_misses_->inc(); return;
    case cache::SharedLookupOutcome::fallback: redis_fallbacks_[static_cast<int>(reason)]->inc(); return;
  }
}

void ProxyMetrics::redis_write(bool acknowledged) {
  if (redis_writes_ == nullptr) return;
  (acknowledged ? redis_writes_ : redis_write_errors_)->inc();
}

void ProxyMetrics::redis_connection_up(bool up) {
  if (up) {
    redis_connections_up_.fetch_add(1);
  } else {
    redis_connections_up_.fetch_sub(1);
  }
}

void ProxyMetrics::refused(unsigned status) {
  registry_.counter("idemproxy_requests_total", {"-", std::string(decision::refused)}).inc();
  registry_.counter("idemproxy_responses_total", {std::to_string(status / 100) + "xx"}).inc();
}

}  // namespace idem::http
