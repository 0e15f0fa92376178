#pragma once
// Shared by the fuzz targets: how an input is cut into parts, and the check that turns a broken
// invariant into a crash libFuzzer records (with the input that caused it).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace idem::fuzz {

// Aborts (a finding) when `condition` is false. Unlike assert(), never compiled out.
#define IDEM_FUZZ_CHECK(condition)                                                            \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// "a\nb\n" -> {"a", "b", ""}; "" -> {} (no parts at all, unlike a single empty one).
inline std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  if (text.empty()) return parts;
  while (true) {
    const std::size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

}  // namespace idem::fuzz
