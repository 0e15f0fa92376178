#pragma once
// Time source for code that needs "now" without I/O (memory store, tests).
#include <chrono>

namespace idem::core {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace idem::core
