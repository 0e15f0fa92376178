#pragma once
// The proxy's Prometheus metrics: families registered once, updated from request traces and the
// components that own the numbers (replay cache, reaper, pools) at scrape time.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>

#include "http/request_trace.hpp"
#include "metrics/registry.hpp"

namespace idem::http {

class ProxyMetrics {
 public:
  ProxyMetrics();
  void record(const RequestTrace& trace, unsigned status);
  void observe_store(std::string_view operation, std::chrono::microseconds elapsed);
  void refused(unsigned status);  // requests answered before being read whole (413, 431, 400)

  metrics::Registry& registry() { return registry_; }
  std::atomic<std::int64_t> in_flight_records{0};  // claims this process holds while executing

 private:
  metrics::Registry registry_;
};

}  // namespace idem::http
