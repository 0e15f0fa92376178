#include "process_memory.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <charconv>
#include <fstream>
#include <string>
#include <string_view>

namespace idem::bench {

std::optional<std::uint64_t> resident_kib(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  constexpr std::string_view kField = "VmRSS:";
  while (std::getline(status, line)) {
    if (!line.starts_with(kField)) continue;
    std::string_view rest = std::string_view(line).substr(kField.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    std::uint64_t kib = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    if (ec != std::errc{} || end == rest.data()) return std::nullopt;
    return kib;  // the kernel writes "kB" and means KiB
  }
  return std::nullopt;
}

void RssSeries::sample() {
  if (!pid_) return;
  if (const auto kib = resident_kib(*pid_)) samples_.push_back(*kib);
}

boost::json::object RssSeries::json() const {
  boost::json::object out;
  if (!pid_) return out;
  out["pid"] = *pid_;
  if (samples_.empty()) return out;
  out["start_kib"] = samples_.front();
  out["end_kib"] = samples_.back();
  out["max_kib"] = *std::max_element(samples_.begin(), samples_.end());
  boost::json::array all;
  for (auto kib : samples_) all.push_back(kib);
  out["samples_kib"] = std::move(all);
  return out;
}

}  // namespace idem::bench
