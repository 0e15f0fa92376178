#pragma once
// RFC 8785 JSON Canonicalization Scheme (JCS), and the same scheme with exact numbers. Parsing is
// Boost.JSON's; serialization is ours because Boost.JSON's serializer is not canonical (it prints
// 1E0, keeps insertion order).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/key_source.hpp"

namespace idem::fingerprint {

// How numbers are canonicalized.
enum class JsonNumbers {
  // RFC 8785: every number is an IEEE-754 double, printed as ECMAScript does. Integers beyond 2^53
  // and decimals beyond 17 significant digits collapse (fingerprint v1).
  ieee_double,
  // The literal's exact decimal value, exact_number_form (fingerprint v2).
  exact_decimal,
};

// Canonical form of `json`, after removing every member/element addressed by the RFC 6901 JSON
// Pointers in `ignore` (a pointer that addresses nothing is skipped). Members are sorted and
// strings escaped as RFC 8785 says; numbers as `numbers` says. std::nullopt when `json` is not a
// single valid I-JSON text (bad syntax, invalid UTF-8, duplicate member names) or holds a number
// its scheme cannot represent (ieee_double: outside double range; exact_decimal: beyond the
// bounds below): callers then hash the raw bytes.
std::optional<std::string> canonicalize_json(std::string_view json, const std::vector<std::string>& ignore = {},
                                             JsonNumbers numbers = JsonNumbers::ieee_double);

// canonicalize_json that also says, from the same parse, what the RFC 6901 `pointer` addresses
// (ignore pointers do not hide it; an empty `pointer` looks nothing up). `pointee` is not_json
// when std::nullopt is returned.
std::optional<std::string> canonicalize_json(std::string_view json, const std::vector<std::string>& ignore,
                                             JsonNumbers numbers, std::string_view pointer,
                                             core::BodyKeyLookup& pointee);

// Bounds of exact_number_form: significant digits (after stripping leading and trailing zeros),
// and the magnitude of the exponent of the normal form.
inline constexpr std::size_t kMaxExactDigits = 1000;
inline constexpr std::int64_t kMaxExactExponent = 999'999'999;

// The normal form of a JSON number literal's exact decimal value, computed on its text (no
// floating point): [-]S[eX], where S is the significand without leading or trailing zeros and X
// the (nonzero) power of ten, so that value = S * 10^X. Every zero is "0" (-0 equals 0). So 1,
// 1.0, 1e0, 10e-1 and 0.1e1 are all "1"; 12345678901234567890 is "1234567890123456789e1";
// -0.00150 is "-15e-4". std::nullopt when `literal` is not a JSON number, or is beyond the
// bounds above (time and memory are linear in the literal's length whatever it holds).
std::optional<std::string> exact_number_form(std::string_view literal);

// ECMAScript Number::toString of a finite double, as JCS requires: "0", "1e+21", "1.5e-7", "123.45".
std::string format_jcs_number(double value);

// Empty when `pointer` is a syntactically valid JSON Pointer ("" or "/a/b~1c"), else why not.
std::string json_pointer_error(std::string_view pointer);

}  // namespace idem::fingerprint
