#include "run_json.hpp"

#include <cmath>
#include <string>

namespace idem::bench {

double microseconds(std::uint64_t nanoseconds) {
  return std::round(static_cast<double>(nanoseconds) / 10.0) / 100.0;
}

boost::json::object latency_json(const LatencyHistogram& histogram) {
  boost::json::object out;
  out["min"] = microseconds(histogram.min());
  out["mean"] = std::round(histogram.mean() / 10.0) / 100.0;
  out["p50"] = microseconds(histogram.value_at_percentile(50));
  out["p90"] = microseconds(histogram.value_at_percentile(90));
  out["p99"] = microseconds(histogram.value_at_percentile(99));
  out["p99_9"] = microseconds(histogram.value_at_percentile(99.9));
  out["p99_99"] = microseconds(histogram.value_at_percentile(99.99));
  out["max"] = microseconds(histogram.max());
  return out;
}

boost::json::array spectrum_json(const LatencyHistogram& histogram) {
  boost::json::array out;
  const auto count = static_cast<double>(histogram.count());
  if (histogram.count() == 0) return out;
  // 20 points per decade of 1/(1-p), up to where one sample is the whole tail.
  for (int k = 0;; ++k) {
    const double tail = std::pow(10.0, -k / 20.0);  // 1 - p
    if (tail * count < 1.0) break;
    const double percentile = 100.0 * (1.0 - tail);
    out.push_back(boost::json::array{std::round(percentile * 1e6) / 1e6,
                                     microseconds(histogram.value_at_percentile(percentile))});
  }
  // The maximum, placed where the sample size ends (HdrHistogram plots do the same).
  out.push_back(boost::json::array{std::round(100.0 * (1.0 - 1.0 / count) * 1e6) / 1e6, microseconds(histogram.max())});
  return out;
}

boost::json::array buckets_json(const LatencyHistogram& histogram) {
  boost::json::array out;
  for (const auto& bucket : histogram.buckets()) {
    out.push_back(boost::json::array{microseconds(bucket.lowest_ns), microseconds(bucket.highest_ns), bucket.count});
  }
  return out;
}

boost::json::object errors_json(const ErrorCounts& errors) {
  boost::json::object out;
  out["total"] = errors.total();
  for (std::size_t i = 0; i < kErrorKindCount; ++i) {
    const auto kind = static_cast<ErrorKind>(i);
    if (errors.count(kind) != 0) out[error_kind_name(kind)] = errors.count(kind);
  }
  return out;
}

boost::json::object statuses_json(const PhaseStats& stats) {
  boost::json::object out;
  for (std::size_t status = 0; status < stats.statuses.size(); ++status) {
    if (stats.statuses[status] != 0) out[std::to_string(status)] = stats.statuses[status];
  }
  return out;
}

}  // namespace idem::bench
