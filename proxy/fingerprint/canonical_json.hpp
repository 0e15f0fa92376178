#pragma once
// RFC 8785 JSON Canonicalization Scheme (JCS). Parsing is Boost.JSON's; serialization is ours
// because Boost.JSON's serializer is not canonical (it prints 1E0, keeps insertion order).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::fingerprint {

// Canonical form of `json`, after removing every member/element addressed by the RFC 6901 JSON
// Pointers in `ignore` (a pointer that addresses nothing is skipped). std::nullopt when `json` is
// not a single valid I-JSON text (bad syntax, invalid UTF-8, duplicate member names, numbers
// outside IEEE-754 double range): callers then hash the raw bytes.
std::optional<std::string> canonicalize_json(std::string_view json, const std::vector<std::string>& ignore = {});

// ECMAScript Number::toString of a finite double, as JCS requires: "0", "1e+21", "1.5e-7", "123.45".
std::string format_jcs_number(double value);

// Empty when `pointer` is a syntactically valid JSON Pointer ("" or "/a/b~1c"), else why not.
std::string json_pointer_error(std::string_view pointer);

}  // namespace idem::fingerprint
