#pragma once
// The bytes idem-stream-upstream sends for a download (and a test uploads): byte i is i % 251,
// as upstream_protocol.hpp's pattern_body, generated a slice at a time so a GiB costs no memory.
#include <cstdint>
#include <string>

namespace idem::test {

// Appends bytes [offset, offset + count) of the pattern to `out`.
inline void append_stream_pattern(std::string& out, std::uint64_t offset, std::uint64_t count) {
  static const std::string period = [] {
    std::string bytes(251 * 2, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i % 251);
    return bytes;
  }();
  while (count > 0) {
    const std::size_t at = static_cast<std::size_t>(offset % 251);
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(count, 251));
    out.append(period, at, take);
    offset += take;
    count -= take;
  }
}

}  // namespace idem::test
