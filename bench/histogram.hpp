#pragma once
// Log-linear latency histogram in the manner of HdrHistogram: values are nanoseconds, every power
// of two is split into 128 linear sub-buckets, so any recorded value is known to within 1/128
// (0.8%) from 1 µs to the 60 s cap, in a fixed 30 KiB array. Recording is an index computation
// and an increment: cheap enough to run on every response of a load-generating thread.
// Not thread-safe: one histogram per thread, merged at the end.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace idem::bench {

class LatencyHistogram {
 public:
  static constexpr std::uint64_t kMaxValueNs = 60'000'000'000;  // larger values are clamped (and counted)

  LatencyHistogram();

  void record(std::uint64_t value_ns);
  void merge(const LatencyHistogram& other);

  std::uint64_t count() const { return count_; }
  std::uint64_t clamped() const { return clamped_; }
  std::uint64_t min() const { return count_ == 0 ? 0 : min_; }
  std::uint64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_); }

  // The value at or below which `percentile` percent (0..100) of the recorded values fall: the
  // highest value equivalent to that bucket, never above the true maximum. 0 when empty.
  std::uint64_t value_at_percentile(double percentile) const;

  struct Bucket {
    std::uint64_t lowest_ns;
    std::uint64_t highest_ns;
    std::uint64_t count;
  };
  // The non-empty buckets, lowest first.
  std::vector<Bucket> buckets() const;

 private:
  static std::size_t index_of(std::uint64_t value_ns);
  static std::uint64_t lowest_of(std::size_t index);
  static std::uint64_t highest_of(std::size_t index);

  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  std::uint64_t clamped_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
  std::uint64_t sum_ = 0;  // 2^64 ns is 584 years of summed latency: no overflow in a bounded run
};

}  // namespace idem::bench
