#include "support/random_hex.hpp"

#include <random>

namespace idem::test {

std::string random_hex(std::size_t digits) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < digits; ++i) out.push_back(kHex[random() % 16]);
  return out;
}

}  // namespace idem::test
