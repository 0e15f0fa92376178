#pragma once
// A clock that moves only when the test says: lease lapses and expiries without sleeping.
#include <chrono>

#include "core/clock.hpp"

namespace idem::test {

class ManualClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override { return now_; }
  void advance(std::chrono::milliseconds duration) { now_ += duration; }

 private:
  std::chrono::steady_clock::time_point now_{std::chrono::hours(1)};
};

}  // namespace idem::test
