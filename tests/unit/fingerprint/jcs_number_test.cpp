// ECMAScript Number::toString as required by RFC 8785 section 3.2.2.3.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "fingerprint/canonical_json.hpp"

namespace idem::fingerprint {
namespace {

struct NumberVector {
  std::uint64_t bits;
  const char* expected;
};

// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical serialization.
constexpr NumberVector kRfc8785Numbers[] = {
    {0x0000000000000000, "0"},
    {0x8000000000000000, "0"},
    {0x0000000000000001, "5e-324"},
    {0x8000000000000001, "-5e-324"},
    {0x7fefffffffffffff, "1.7976931348623157e+308"},
    {0xffefffffffffffff, "-1.7976931348623157e+308"},
    {0x4340000000000000, "9007199254740992"},
    {0xc340000000000000, "-9007199254740992"},
    {0x4430000000000000, "295147905179352830000"},
    {0x44b52d02c7e14af5, "9.999999999999997e+22"},
    {0x44b52d02c7e14af6, "1e+23"},
    {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
    {0x444b1ae4d6e2ef4e, "999999999999999700000"},
    {0x444b1ae4d6e2ef4f, "999999999999999900000"},
    {0x444b1ae4d6e2ef50, "1e+21"},
    {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
    {0x3eb0c6f7a0b5ed8d, "0.000001"},
    {0x41b3de4355555553, "333333333.3333332"},
    {0x41b3de4355555554, "333333333.33333325"},
    {0x41b3de4355555555, "333333333.3333333"},
    {0x41b3de4355555556, "333333333.3333334"},
    {0x41b3de4355555557, "333333333.33333343"},
    {0xbecbf647612f3696, "-0.0000033333333333333333"},
    {0x43143ff3c1cb0959, "1424953923781206.2"},
    {0x3e7ad7f29abcaf48, "1e-7"},
    {0x3e7ad7f29abcaf4b, "1.0000000000000004e-7"},
};

TEST(JcsNumber, Rfc8785AppendixB) {
  for (const NumberVector& vector : kRfc8785Numbers) {
    const double value = std::bit_cast<double>(vector.bits);
    EXPECT_EQ(format_jcs_number(value), vector.expected) << std::hex << "bits 0x" << vector.bits;
  }
}

TEST(JcsNumber, IntegersPrintWithoutExponentBelowOneE21) {
  EXPECT_EQ(format_jcs_number(1), "1");
  EXPECT_EQ(format_jcs_number(-1), "-1");
  EXPECT_EQ(format_jcs_number(100), "100");
  EXPECT_EQ(format_jcs_number(9007199254740991.0), "9007199254740991");
  EXPECT_EQ(format_jcs_number(-9007199254740991.0), "-9007199254740991");
  EXPECT_EQ(format_jcs_number(9007199254740994.0), "9007199254740994");
  EXPECT_EQ(format_jcs_number(1e20), "100000000000000000000");
  EXPECT_EQ(format_jcs_number(1e21), "1e+21");
  EXPECT_EQ(format_jcs_number(-1e21), "-1e+21");
  EXPECT_EQ(format_jcs_number(1.5e300), "1.5e+300");
}

TEST(JcsNumber, FractionsUseExponentBelowOneMillionth) {
  EXPECT_EQ(format_jcs_number(0.1), "0.1");
  EXPECT_EQ(format_jcs_number(123.45), "123.45");
  EXPECT_EQ(format_jcs_number(-0.5), "-0.5");
  EXPECT_EQ(format_jcs_number(1e-6), "0.000001");
  EXPECT_EQ(format_jcs_number(1.5e-6), "0.0000015");
  EXPECT_EQ(format_jcs_number(1e-7), "1e-7");
  EXPECT_EQ(format_jcs_number(1.5e-7), "1.5e-7");
  EXPECT_EQ(format_jcs_number(-2.5e-10), "-2.5e-10");
  EXPECT_EQ(format_jcs_number(0.1 + 0.2), "0.30000000000000004");
}

TEST(JcsNumber, NegativeZeroIsZero) { EXPECT_EQ(format_jcs_number(-0.0), "0"); }

TEST(JcsNumber, NonFiniteFollowsEcmaScript) {
  EXPECT_EQ(format_jcs_number(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_jcs_number(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(format_jcs_number(-std::numeric_limits<double>::infinity()), "-Infinity");
}

// Number literals in documents: every number is an IEEE-754 double, whatever its spelling.
TEST(JcsNumber, LiteralsAreNormalizedThroughDouble) {
  const auto canonical = [](std::string_view json) { return canonicalize_json(json).value_or("<nullopt>"); };
  EXPECT_EQ(canonical("[1.0,2.50,3e0,1E3,-0,0.0,-0.0]"), "[1,2.5,3,1000,0,0,0]");
  EXPECT_EQ(canonical("9007199254740993"), "9007199254740992");  // 2^53 + 1 is not a double
  EXPECT_EQ(canonical("18446744073709551615"), "18446744073709552000");
  EXPECT_EQ(canonical("-9223372036854775808"), "-9223372036854776000");
  EXPECT_EQ(canonical("123456789012345678901234567890"), "1.2345678901234568e+29");
  EXPECT_EQ(canonical("0.0000001"), "1e-7");
  EXPECT_EQ(canonical("333333333.33333329"), "333333333.3333333");
  EXPECT_EQ(canonical("1.7976931348623157e308"), "1.7976931348623157e+308");
  EXPECT_EQ(canonical("4.9406564584124654e-324"), "5e-324");
  EXPECT_EQ(canonical("1e-400"), "0");  // underflows to zero as in JSON.parse
  EXPECT_EQ(canonical("-1e-400"), "0");
  EXPECT_EQ(canonical("1e-324"), "0");   // below half the smallest subnormal
  EXPECT_EQ(canonical("3e-324"), "5e-324");  // rounds up to the smallest subnormal
  // 314 zeros after the point: leading zeros count towards the magnitude.
  const std::string zeros(313, '0');
  EXPECT_EQ(canonical("0." + zeros + "1e2"), "1e-312");
  EXPECT_EQ(canonical("0." + zeros + "1e-100"), "0");
  EXPECT_EQ(canonical("100" + zeros + "e-600"), "1e-285");
  EXPECT_EQ(canonical("100" + zeros + "e-700"), "0");
}

TEST(JcsNumber, NumbersBeyondDoubleRangeAreNotIJson) {
  EXPECT_EQ(canonicalize_json("1e400"), std::nullopt);
  EXPECT_EQ(canonicalize_json("-1e400"), std::nullopt);
  EXPECT_EQ(canonicalize_json("1.8e308"), std::nullopt);
  EXPECT_EQ(canonicalize_json("[1, 2e99999]"), std::nullopt);
  EXPECT_EQ(canonicalize_json("0.01e311"), std::nullopt);
  EXPECT_EQ(canonicalize_json("1000e306"), std::nullopt);
  EXPECT_EQ(canonicalize_json("0.000001e315"), std::nullopt);
  EXPECT_EQ(canonicalize_json("1" + std::string(309, '0')), std::nullopt);
  EXPECT_EQ(canonicalize_json("{\"a\":[1e309]}"), std::nullopt);
}

}  // namespace
}  // namespace idem::fingerprint
