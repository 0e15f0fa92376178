#pragma once
// Capped exponential backoff with "equal jitter": the n-th consecutive failure waits a random
// duration in [d/2, d] where d = min(max, initial * 2^(n-1)). The jitter spreads retries of rows
// (and relays) that failed together, so they do not return together.
#include <chrono>
#include <random>

namespace idem::relay {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max);
  // failures >= 1.
  std::chrono::milliseconds delay(int failures);

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  std::minstd_rand random_;
};

}  // namespace idem::relay
