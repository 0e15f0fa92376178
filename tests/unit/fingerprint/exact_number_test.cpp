// The exact normal form of JSON numbers (fingerprint v2): computed on the literal's text, equal for
// equal decimal values, distinct for distinct ones however many digits they have, and bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fingerprint/canonical_json.hpp"

namespace idem::fingerprint {
namespace {

struct Form {
  const char* literal;
  const char* expected;
};

// The normal form itself: [-]S[eX], S without leading or trailing zeros.
constexpr Form kForms[] = {
    {"0", "0"},
    {"-0", "0"},
    {"0.000", "0"},
    {"-0.0e-7", "0"},
    {"0e999999999999999999999", "0"},
    {"1", "1"},
    {"1.0", "1"},
    {"1e0", "1"},
    {"1E+0", "1"},
    {"10e-1", "1"},
    {"0.1e1", "1"},
    {"100", "1e2"},
    {"-100", "-1e2"},
    {"0.15", "15e-2"},
    {"-0.00150", "-15e-4"},
    {"123.456e3", "123456"},
    {"12345678901234567890", "1234567890123456789e1"},
    {"12345678901234567891", "12345678901234567891"},
    {"18446744073709551617", "18446744073709551617"},  // 2^64 + 1
    {"9007199254740993", "9007199254740993"},          // 2^53 + 1: a double says ...992
    {"0.1000000000000000055511151231257827", "1000000000000000055511151231257827e-34"},
    {"1e999999999", "1e999999999"},
    {"1e-999999999", "1e-999999999"},
    {"10e999999998", "1e999999999"},
    {"0.01e-999999997", "1e-999999999"},
};

TEST(ExactNumberForm, NormalForms) {
  for (const Form& form : kForms) EXPECT_EQ(exact_number_form(form.literal), form.expected) << form.literal;
}

// Pairs with the same decimal value.
constexpr Form kEqual[] = {
    {"1.0", "1"},
    {"1e0", "1"},
    {"10e-1", "1"},
    {"0.1e1", "1"},
    {"1.000000000000000000000000000000", "1"},
    {"-0", "0"},
    {"-0.0", "0e5"},
    {"12345678901234567890", "1234567890123456789e1"},
    {"1.2345678901234567890123456789e28", "12345678901234567890123456789"},
    {"250e-2", "2.5"},
    {"-7.50E+1", "-75"},
};

// Pairs with different decimal values that a double (and so v1) does not tell apart.
constexpr Form kDistinct[] = {
    {"12345678901234567890", "12345678901234567891"},
    {"18446744073709551616", "18446744073709551617"},  // 2^64 and 2^64 + 1
    {"9007199254740992", "9007199254740993"},
    {"123456789012345678901234567890123456789", "123456789012345678901234567890123456788"},
    {"0.1", "0.1000000000000000055511151231257827"},
    {"3.14159265358979323846264338327950288", "3.14159265358979323846264338327950289"},
    {"1e400", "1e401"},  // beyond double range: v1 has no value for either
    {"1e-400", "2e-400"},
    {"1", "-1"},
    {"0", "1e-999999999"},
};

TEST(ExactNumberForm, EqualValuesHaveOneForm) {
  for (const Form& pair : kEqual) {
    ASSERT_TRUE(exact_number_form(pair.literal)) << pair.literal;
    EXPECT_EQ(exact_number_form(pair.literal), exact_number_form(pair.expected)) << pair.literal << " vs " << pair.expected;
  }
}

TEST(ExactNumberForm, DistinctValuesHaveDistinctForms) {
  for (const Form& pair : kDistinct) {
    ASSERT_TRUE(exact_number_form(pair.literal)) << pair.literal;
    ASSERT_TRUE(exact_number_form(pair.expected)) << pair.expected;
    EXPECT_NE(exact_number_form(pair.literal), exact_number_form(pair.expected)) << pair.literal << " vs " << pair.expected;
  }
}

TEST(ExactNumberForm, ManyDigitsUpToTheBound) {
  const std::string at_bound = "1" + std::string(kMaxExactDigits - 2, '0') + "1";
  ASSERT_EQ(exact_number_form(at_bound), at_bound);
  std::string one_less = at_bound;
  one_less.back() = '2';
  EXPECT_NE(exact_number_form(one_less), exact_number_form(at_bound));
  // Zeros on either end are not significant digits: they never count against the bound.
  const std::string padded = "0." + std::string(5000, '0') + "1" + std::string(5000, '0');
  EXPECT_EQ(exact_number_form(padded), "1e-5001");
  EXPECT_EQ(exact_number_form("1" + std::string(5000, '0')), "1e5000");
}

TEST(ExactNumberForm, BeyondTheBoundsIsNoForm) {
  EXPECT_FALSE(exact_number_form("1" + std::string(kMaxExactDigits - 1, '0') + "1"));  // kMaxExactDigits + 1
  EXPECT_FALSE(exact_number_form("0." + std::string(kMaxExactDigits + 1, '7')));
  EXPECT_FALSE(exact_number_form("1e1000000000"));
  EXPECT_FALSE(exact_number_form("1e-1000000000"));
  EXPECT_FALSE(exact_number_form("-1e99999999999999999999999999999999999999"));
  EXPECT_FALSE(exact_number_form("10e999999999"));  // normalizes to 1e1000000000
}

TEST(ExactNumberForm, AbsurdLiteralsCostLinearTime) {
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(exact_number_form("1e" + std::string(1'000'000, '9')));
  EXPECT_EQ(exact_number_form("1e" + std::string(1'000'000, '0')), "1");
  EXPECT_FALSE(exact_number_form(std::string(1'000'000, '7')));
  EXPECT_EQ(exact_number_form("0." + std::string(1'000'000, '0')), "0");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
}

TEST(ExactNumberForm, NotANumberIsNoForm) {
  for (const char* literal : {"", "-", "01", "-01", "1.", ".5", "1e", "1e+", "+1", "1.5.5", "0x10", "NaN", "1 ", "1e5x"}) {
    EXPECT_FALSE(exact_number_form(literal)) << '"' << literal << '"';
  }
}

std::optional<std::string> exact(std::string_view json) { return canonicalize_json(json, {}, JsonNumbers::exact_decimal); }

TEST(CanonicalJsonExact, NumbersAreWrittenInTheirNormalForm) {
  EXPECT_EQ(exact(R"({"b":1.0,"a":[10,-0,0.5e1,12345678901234567890]})"),
            R"({"a":[1e1,0,5,1234567890123456789e1],"b":1})");
}

TEST(CanonicalJsonExact, AccountNumbersBeyondDoublePrecisionStayDistinct) {
  const std::string_view first = R"({"account":12345678901234567890})";
  const std::string_view second = R"({"account":12345678901234567891})";
  EXPECT_EQ(canonicalize_json(first), canonicalize_json(second)) << "JCS (v1) collapses them";
  EXPECT_NE(exact(first), exact(second));
}

TEST(CanonicalJsonExact, NumbersBeyondDoubleRangeAreCanonical) {
  EXPECT_FALSE(canonicalize_json("[1e400]"));
  EXPECT_EQ(exact("[1e400, 1E-400]"), "[1e400,1e-400]");
}

TEST(CanonicalJsonExact, NumbersBeyondTheBoundsAreNotCanonical) {
  EXPECT_FALSE(exact("[1e1000000000]"));
  EXPECT_FALSE(exact("[" + std::string(kMaxExactDigits + 1, '3') + "]"));
}

TEST(CanonicalJsonExact, EverythingButNumbersIsJcs) {
  const std::string_view document = R"({"z":"\u00e9\n","a":[true,null,{"y":"x"}],"\u20ac":"","b":"c"})";
  EXPECT_EQ(exact(document), canonicalize_json(document));
  EXPECT_EQ(canonicalize_json(R"({"t":"2024-05-01","n":1,"x":1})", {"/n"}, JsonNumbers::exact_decimal),
            R"({"t":"2024-05-01","x":1})");
}

}  // namespace
}  // namespace idem::fingerprint
