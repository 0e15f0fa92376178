// parse_duration / parse_byte_size (declared in config.hpp) and their message formatting.
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "config/config_loader.hpp"
#include "config/units.hpp"

namespace idem::config {
namespace {

constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Leading decimal digits of `text`, removed from it. Empty when there are none.
std::string_view take_digits(std::string_view& text) {
  std::size_t n = 0;
  while (n < text.size() && is_digit(text[n])) ++n;
  const std::string_view digits = text.substr(0, n);
  text.remove_prefix(n);
  return digits;
}

std::optional<std::uint64_t> to_uint64(std::string_view digits) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> checked_multiply(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

struct Unit {
  std::string_view suffix;
  std::uint64_t factor;
};

constexpr Unit kDurationUnits[] = {
    {"ms", 1}, {"s", 1'000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000},
};

// Decimal (kB, MB, GB) and binary (KiB, MiB, GiB) multiples; "KB" is accepted as the common
// spelling of kB. Lower-case "mb"/"gb" are refused: they read as megabits as often as megabytes.
constexpr Unit kByteUnits[] = {
    {"B", 1},
    {"kB", 1'000},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"KiB", 1ULL << 10},
    {"MiB", 1ULL << 20},
    {"GiB", 1ULL << 30},
};

template <std::size_t N>
std::optional<std::uint64_t> unit_factor(const Unit (&units)[N], std::string_view suffix) {
  for (const Unit& unit : units) {
    if (unit.suffix == suffix) return unit.factor;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text == "0") return std::chrono::milliseconds{0};
  std::string_view rest = text;
  const std::string_view whole_digits = take_digits(rest);
  if (whole_digits.empty()) return std::nullopt;
  std::string_view fraction_digits;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    fraction_digits = take_digits(rest);
    // At most 9 fraction digits keeps fraction * factor (< 1e9 * 8.64e7) inside 64 bits.
    if (fraction_digits.empty() || fraction_digits.size() > 9) return std::nullopt;
  }
  const std::optional<std::uint64_t> factor = unit_factor(kDurationUnits, rest);
  const std::optional<std::uint64_t> whole = to_uint64(whole_digits);
  if (!factor || !whole) return std::nullopt;

  std::optional<std::uint64_t> total = checked_multiply(*whole, *factor);
  if (!total) return std::nullopt;
  if (!fraction_digits.empty()) {
    std::uint64_t scale = 1;
    for (std::size_t i = 0; i < fraction_digits.size(); ++i) scale *= 10;
    const std::uint64_t fraction_ms = *to_uint64(fraction_digits) * *factor;
    // A duration below millisecond precision ("0.5ms", "1.0001s") would be silently rounded.
    if (fraction_ms % scale != 0) return std::nullopt;
    if (*total > std::numeric_limits<std::uint64_t>::max() - fraction_ms / scale) return std::nullopt;
    *total += fraction_ms / scale;
  }
  using Rep = std::chrono::milliseconds::rep;
  if (*total > static_cast<std::uint64_t>(std::numeric_limits<Rep>::max())) return std::nullopt;
  return std::chrono::milliseconds{static_cast<Rep>(*total)};
}

std::optional<std::size_t> parse_byte_size(std::string_view text) {
  std::string_view rest = text;
  const std::string_view digits = take_digits(rest);
  if (digits.empty()) return std::nullopt;
  const std::optional<std::uint64_t> number = to_uint64(digits);
  const std::optional<std::uint64_t> factor =
      rest.empty() ? std::optional<std::uint64_t>{1} : unit_factor(kByteUnits, rest);
  if (!number || !factor) return std::nullopt;
  const std::optional<std::uint64_t> total = checked_multiply(*number, *factor);
  if (!total) return std::nullopt;
  if constexpr (sizeof(std::size_t) < sizeof(std::uint64_t)) {
    if (*total > std::numeric_limits<std::size_t>::max()) return std::nullopt;
  }
  return static_cast<std::size_t>(*total);
}

namespace detail {

std::string format_duration(std::chrono::milliseconds value) {
  const auto ms = value.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 1'000 == 0) return std::to_string(ms / 1'000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace detail
}  // namespace idem::config
