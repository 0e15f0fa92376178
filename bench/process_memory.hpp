#pragma once
// Resident set size of a process, from /proc/PID/status (VmRSS), in KiB, and a series of samples
// of it over a run.
#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <vector>

namespace idem::bench {

std::optional<std::uint64_t> resident_kib(int pid);

// {"pid","start_kib","end_kib","max_kib","samples_kib"}. Without a pid, sample() does nothing and
// json() is empty.
class RssSeries {
 public:
  explicit RssSeries(std::optional<int> pid) : pid_(pid) {}
  void sample();
  bool enabled() const { return pid_.has_value(); }
  std::optional<std::uint64_t> last() const {
    return samples_.empty() ? std::nullopt : std::optional<std::uint64_t>(samples_.back());
  }
  boost::json::object json() const;

 private:
  std::optional<int> pid_;
  std::vector<std::uint64_t> samples_;
};

}  // namespace idem::bench
