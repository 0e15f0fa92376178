// parse_duration and parse_byte_size: accepted spellings, their values, and what is refused.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>

#include <gtest/gtest.h>

#include "config/config_loader.hpp"

namespace idem::config {
namespace {

using namespace std::chrono_literals;

struct DurationCase {
  std::string_view text;
  std::optional<std::chrono::milliseconds> expected;
};

class Durations : public ::testing::TestWithParam<DurationCase> {};

TEST_P(Durations, Parse) { EXPECT_EQ(parse_duration(GetParam().text), GetParam().expected) << '"' << GetParam().text << '"'; }

INSTANTIATE_TEST_SUITE_P(
    Table, Durations,
    ::testing::Values(DurationCase{"0", 0ms}, DurationCase{"0s", 0ms}, DurationCase{"250ms", 250ms}, DurationCase{"1s", 1s},
                      DurationCase{"1.5s", 1500ms}, DurationCase{"0.25s", 250ms}, DurationCase{"2m", 2min},
                      DurationCase{"1.5m", 90s}, DurationCase{"24h", 24h}, DurationCase{"7d", 7 * 24h},
                      DurationCase{"0.001s", 1ms}, DurationCase{"007s", 7s},
                      // refused: no unit, unknown unit, sign, sub-millisecond, malformed numbers
                      DurationCase{"", std::nullopt}, DurationCase{"5", std::nullopt}, DurationCase{"5x", std::nullopt},
                      DurationCase{"5S", std::nullopt}, DurationCase{"5 s", std::nullopt}, DurationCase{" 5s", std::nullopt},
                      DurationCase{"-1s", std::nullopt}, DurationCase{"+1s", std::nullopt}, DurationCase{"1.5ms", std::nullopt},
                      DurationCase{"0.0001s", std::nullopt}, DurationCase{".5s", std::nullopt}, DurationCase{"5.s", std::nullopt},
                      DurationCase{"1e3s", std::nullopt}, DurationCase{"s", std::nullopt}, DurationCase{"1h30m", std::nullopt},
                      DurationCase{"0.0000000001s", std::nullopt},
                      // overflow: beyond 64-bit milliseconds, and beyond 64-bit digits
                      DurationCase{"200000000000d", std::nullopt}, DurationCase{"99999999999999999999ms", std::nullopt}));

TEST(Durations, LargestRepresentableValue) {
  const auto max_ms = std::chrono::milliseconds::max().count();
  EXPECT_EQ(parse_duration(std::to_string(max_ms) + "ms"), std::chrono::milliseconds::max());
  EXPECT_EQ(parse_duration(std::to_string(max_ms) + "0ms"), std::nullopt);
}

struct SizeCase {
  std::string_view text;
  std::optional<std::size_t> expected;
};

class ByteSizes : public ::testing::TestWithParam<SizeCase> {};

TEST_P(ByteSizes, Parse) { EXPECT_EQ(parse_byte_size(GetParam().text), GetParam().expected) << '"' << GetParam().text << '"'; }

INSTANTIATE_TEST_SUITE_P(
    Table, ByteSizes,
    ::testing::Values(SizeCase{"0", 0}, SizeCase{"512", 512}, SizeCase{"1B", 1}, SizeCase{"1kB", 1000}, SizeCase{"1KB", 1000},
                      SizeCase{"10MB", 10'000'000}, SizeCase{"1GB", 1'000'000'000}, SizeCase{"64KiB", 64 * 1024},
                      SizeCase{"1MiB", 1024 * 1024}, SizeCase{"1GiB", 1024 * 1024 * 1024},
                      SizeCase{"16GiB", std::size_t{16} * 1024 * 1024 * 1024},
                      // refused: decimals, unknown or lower-case units, spaces, signs
                      SizeCase{"", std::nullopt}, SizeCase{"1.5MiB", std::nullopt}, SizeCase{"1mb", std::nullopt},
                      SizeCase{"1kib", std::nullopt}, SizeCase{"1 KiB", std::nullopt}, SizeCase{"-1", std::nullopt},
                      SizeCase{"+1", std::nullopt}, SizeCase{"KiB", std::nullopt}, SizeCase{"1TB", std::nullopt},
                      // overflow
                      SizeCase{"18446744073709551616", std::nullopt}, SizeCase{"17179869184GiB", std::nullopt}));

TEST(ByteSizes, LargestRepresentableValue) {
  const std::size_t max = static_cast<std::size_t>(-1);
  EXPECT_EQ(parse_byte_size(std::to_string(max)), max);
  EXPECT_EQ(parse_byte_size(std::to_string(max / 1000) + "kB"), (max / 1000) * 1000);
  EXPECT_EQ(parse_byte_size(std::to_string(max / 1000 + 1) + "kB"), std::nullopt);
}

}  // namespace
}  // namespace idem::config
