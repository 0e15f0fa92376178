#pragma once
// Private to core: the few ASCII helpers HTTP field handling needs. Header names and the
// tokens compared here are ASCII by definition, so no locale is involved.
#include <algorithm>
#include <string_view>

namespace idem::core::ascii {

constexpr char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Senders mostly spell a name as the standard does: an exact match is tried first (a memcmp).
constexpr bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && (a == b || std::equal(a.begin(), a.end(), b.begin(),
                                                       [](char x, char y) { return to_lower(x) == to_lower(y); }));
}

constexpr bool is_ows(char c) { return c == ' ' || c == '\t'; }

constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

// RFC 9110 OWS (spaces and tabs) removed from both ends.
constexpr std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace idem::core::ascii
