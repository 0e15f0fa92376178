#include "http/proxy_metrics.hpp"

#include <string>

namespace idem::http {

ProxyMetrics::ProxyMetrics() {
  registry_.add_counter("idemproxy_requests_total", "Requests by route and idempotency decision.", {"route", "decision"});
  registry_.add_counter("idemproxy_responses_total", "Responses by status class.", {"class"});
  registry_.add_histogram("idemproxy_upstream_duration_seconds", "Time from writing a request upstream to its full response.",
                          {"route"});
  registry_.add_histogram("idemproxy_store_duration_seconds", "Store (Postgres) operation latency, queueing included.",
                          {"operation"});
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
}

void ProxyMetrics::observe_store(std::string_view operation, std::chrono::microseconds elapsed) {
  registry_.histogram("idemproxy_store_duration_seconds", {std::string(operation)}).observe_micros(elapsed.count());
}

void ProxyMetrics::refused(unsigned status) {
  registry_.counter("idemproxy_requests_total", {"-", std::string(decision::refused)}).inc();
  registry_.counter("idemproxy_responses_total", {std::to_string(status / 100) + "xx"}).inc();
}

}  // namespace idem::http
