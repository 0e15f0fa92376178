#include "http/proxy_metrics.hpp"

#include <algorithm>
#include <string>

namespace idem::http {

ProxyMetrics::ProxyMetrics() {
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
}

void ProxyMetrics::record(const RequestTrace& trace, unsigned status) {
  registry_.counter("idemproxy_requests_total", {trace.route, std::string(trace.decision)}).inc();
  const std::string status_class = std::to_string(status / 100) + "xx";
  registry_.counter("idemproxy_responses_total", {status_class}).inc();
  if (trace.upstream.count() > 0) {
    registry_.histogram("idemproxy_upstream_duration_seconds", {trace.route}).observe_micros(trace.upstream.count());
  }
  if (trace.decision == decision::replay) {
    registry_.counter("idemproxy_replays_total", {trace.route, trace.cache_hit ? "local" : "postgres"}).inc();
  } else if (trace.decision == decision::replay_redis) {
    registry_.counter("idemproxy_replays_total", {trace.route, "redis"}).inc();
  }
  registry_.histogram("idemproxy_request_duration_seconds", {trace.route, status_class})
      .observe_micros(trace.handled.count());
  // A response whose upstream exchange overlapped nothing else the proxy did adds nothing, never
  // a negative time (the two clocks are read at different points).
  const auto added = std::max(trace.handled - trace.upstream, std::chrono::microseconds{0});
  registry_.histogram("idemproxy_added_latency_seconds", {trace.route}).observe_micros(added.count());
}

void ProxyMetrics::observe_store(std::string_view operation, std::chrono::microseconds elapsed) {
  registry_.histogram("idemproxy_store_duration_seconds", {std::string(operation)}).observe_micros(elapsed.count());
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
