#include "histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace idem::bench {
namespace {

// Bucket 0 holds the values 0..255 exactly; bucket b >= 1 holds [128 << b, 256 << b) in 128 steps
// of (1 << b). Flat index = b * 128 + (value >> b), which makes the buckets contiguous.
constexpr unsigned kSubBucketHalfBits = 7;
constexpr std::uint64_t kSubBucketHalf = std::uint64_t{1} << kSubBucketHalfBits;  // 128
constexpr std::uint64_t kSubBucketCount = kSubBucketHalf * 2;                      // 256

unsigned bucket_of(std::uint64_t value) {
  const unsigned magnitude = 63u - static_cast<unsigned>(std::countl_zero(value | 1u));
  return magnitude <= kSubBucketHalfBits ? 0u : magnitude - kSubBucketHalfBits;
}

}  // namespace

std::size_t LatencyHistogram::index_of(std::uint64_t value) {
  const unsigned bucket = bucket_of(value);
  return static_cast<std::size_t>(bucket * kSubBucketHalf + (value >> bucket));
}

std::uint64_t LatencyHistogram::lowest_of(std::size_t index) {
  if (index < kSubBucketCount) return index;
  const unsigned bucket = static_cast<unsigned>(index / kSubBucketHalf) - 1u;
  const std::uint64_t sub = index - bucket * kSubBucketHalf;
  return sub << bucket;
}

std::uint64_t LatencyHistogram::highest_of(std::size_t index) {
  if (index < kSubBucketCount) return index;
  const unsigned bucket = static_cast<unsigned>(index / kSubBucketHalf) - 1u;
  const std::uint64_t sub = index - bucket * kSubBucketHalf;
  return ((sub + 1) << bucket) - 1;
}

LatencyHistogram::LatencyHistogram() : counts_(index_of(kMaxValueNs) + 1, 0) {}

void LatencyHistogram::record(std::uint64_t value_ns) {
  if (value_ns > kMaxValueNs) {
    value_ns = kMaxValueNs;
    ++clamped_;
  }
  ++counts_[index_of(value_ns)];
  ++count_;
  sum_ += value_ns;
  min_ = std::min(min_, value_ns);
  max_ = std::max(max_, value_ns);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  clamped_ += other.clamped_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

std::uint64_t LatencyHistogram::value_at_percentile(double percentile) const {
  if (count_ == 0) return 0;
  if (percentile <= 0.0) return min_;
  const double clamped = std::clamp(percentile, 0.0, 100.0);
  // The rank of the value sought, 1-based: p50 of 3 values is the 2nd.
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(clamped / 100.0 * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(highest_of(i), max_);
  }
  return max_;
}

std::vector<LatencyHistogram::Bucket> LatencyHistogram::buckets() const {
  std::vector<Bucket> out;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] != 0) out.push_back({lowest_of(i), highest_of(i), counts_[i]});
  }
  return out;
}

}  // namespace idem::bench
