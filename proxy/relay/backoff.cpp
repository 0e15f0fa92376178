#include "relay/backoff.hpp"

#include <algorithm>
#include <cstdint>

namespace idem::relay {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      max_(std::max(max, initial_)),
      random_(std::random_device{}()) {}

std::chrono::milliseconds Backoff::delay(int failures) {
  std::int64_t ceiling = initial_.count();
  for (int i = 1; i < failures && ceiling < max_.count(); ++i) ceiling *= 2;  // stops before overflow
  ceiling = std::min(ceiling, max_.count());
  std::uniform_int_distribution<std::int64_t> spread(ceiling / 2, ceiling);
  return std::chrono::milliseconds(std::max<std::int64_t>(1, spread(random_)));
}

}  // namespace idem::relay
