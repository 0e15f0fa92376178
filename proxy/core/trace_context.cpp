#include "core/trace_context.hpp"

#include <algorithm>
#include <cstddef>

namespace idem::core {
namespace {

constexpr std::size_t kVersion00Length = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
constexpr std::size_t kMaxTracestate = 512;

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// `size` lowercase hex digits at `at`, and (when `nonzero`) not all zeros.
bool hex_field(std::string_view value, std::size_t at, std::size_t size, bool nonzero) {
  const std::string_view field = value.substr(at, size);
  if (field.size() != size || !std::all_of(field.begin(), field.end(), is_lower_hex)) return false;
  return !nonzero || field.find_first_not_of('0') != std::string_view::npos;
}

}  // namespace

bool is_valid_traceparent(std::string_view value) {
  if (value.size() < kVersion00Length) return false;
  if (!hex_field(value, 0, 2, false) || value.substr(0, 2) == "ff") return false;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return false;
  if (!hex_field(value, 3, 32, true) || !hex_field(value, 36, 16, true) || !hex_field(value, 53, 2, false)) {
    return false;
  }
  if (value.substr(0, 2) == "00") return value.size() == kVersion00Length;
  return value.size() == kVersion00Length || value[kVersion00Length] == '-';
}

bool is_valid_tracestate(std::string_view value) {
  if (value.empty() || value.size() > kMaxTracestate) return false;
  if (value.find_first_not_of(' ') == std::string_view::npos) return false;
  return std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace idem::core
