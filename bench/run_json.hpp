#pragma once
// The pieces of idem-loadgen's JSON result that come from the tallies: latency percentiles, the
// percentile spectrum for plotting, raw buckets, errors and statuses.
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "histogram.hpp"
#include "verification.hpp"

namespace idem::bench {

// {"min","mean","p50","p90","p99","p99_9","p99_99","max"} in microseconds (0.01 µs resolution).
boost::json::object latency_json(const LatencyHistogram& histogram);

// [[percentile, microseconds], ...] at percentiles 1 - 10^(-k/20) from 0 up to the last one the
// sample size supports, then the maximum: the x axis of an HdrHistogram-style plot is
// 1 / (1 - percentile / 100), on a log scale.
boost::json::array spectrum_json(const LatencyHistogram& histogram);

// [[lowest_us, highest_us, count], ...] for the non-empty buckets.
boost::json::array buckets_json(const LatencyHistogram& histogram);

// {"total": n, "<kind>": n, ...} (only the kinds that occurred).
boost::json::object errors_json(const ErrorCounts& errors);

// {"200": n, "409": n, ...}
boost::json::object statuses_json(const PhaseStats& stats);

double microseconds(std::uint64_t nanoseconds);

}  // namespace idem::bench
