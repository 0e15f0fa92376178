#include "core/key_format.hpp"

#include <algorithm>
#include <regex>
#include <utility>

namespace idem::core {

class KeyPattern {
 public:
  explicit KeyPattern(const std::string& pattern) : regex_(pattern, std::regex::ECMAScript) {}
  // A full match. The engine may give up on a pathological pattern (error_complexity,
  // error_stack): such a key is refused, never let through unchecked, and no exception leaves.
  bool matches(std::string_view key) const {
    try {
      return std::regex_match(key.begin(), key.end(), regex_);
    } catch (const std::regex_error&) {
      return false;
    }
  }

 private:
  std::regex regex_;
};

namespace {

constexpr std::size_t kUuidLength = 36;
constexpr std::size_t kUlidLength = 26;
constexpr std::string_view kRegexPrefix = "regex:";

constexpr bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// 8-4-4-4-12 hex digits. The version and variant nibbles are not checked: the owner asked for a
// UUID's shape, and clients generate v4, v7 or others (the nil and max UUIDs included).
bool is_uuid(std::string_view key) {
  if (key.size() != kUuidLength) return false;
  for (std::size_t i = 0; i < key.size(); ++i) {
    const bool hyphen_position = i == 8 || i == 13 || i == 18 || i == 23;
    if (hyphen_position ? key[i] != '-' : !is_hex_digit(key[i])) return false;
  }
  return true;
}

// Crockford's base32 without I, L, O and U (which it only reads as aliases), in either case; the
// first character is 0-7 as a ULID is 128 bits.
bool is_ulid(std::string_view key) {
  if (key.size() != kUlidLength || key.front() < '0' || key.front() > '7') return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    if (c >= '0' && c <= '9') return true;
    const char upper = c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    return upper >= 'A' && upper <= 'Z' && upper != 'I' && upper != 'L' && upper != 'O' && upper != 'U';
  });
}

}  // namespace

std::variant<KeyFormat, std::string> parse_key_format(std::string_view text) {
  KeyFormat format;
  if (text == "any") return format;
  if (text == "uuid" || text == "ulid") {
    format.kind = text == "uuid" ? KeyFormatKind::uuid : KeyFormatKind::ulid;
    return format;
  }
  if (!text.starts_with(kRegexPrefix)) {
    return std::string("expected any, uuid, ulid or \"regex:<regular expression>\"");
  }
  format.kind = KeyFormatKind::regex;
  format.pattern = text.substr(kRegexPrefix.size());
  if (format.pattern.empty()) return std::string("the regular expression after \"regex:\" is empty");
  try {
    format.compiled = std::make_shared<const KeyPattern>(format.pattern);
    return format;
  } catch (const std::regex_error& error) {
    // The library's own words name the problem ("Unexpected character within '[...]' ...").
    return "not a valid ECMAScript regular expression: " + std::string(error.what());
  }
}

std::optional<std::size_t> key_format_length(const KeyFormat& format) {
  switch (format.kind) {
    case KeyFormatKind::uuid: return kUuidLength;
    case KeyFormatKind::ulid: return kUlidLength;
    case KeyFormatKind::any:
    case KeyFormatKind::regex: break;
  }
  return std::nullopt;
}

std::optional<std::string> broken_key_rule(std::string_view key, std::size_t min_length, const KeyFormat& format) {
  switch (format.kind) {
    case KeyFormatKind::any: break;
    case KeyFormatKind::uuid:
      if (!is_uuid(key))
        return std::string("be a UUID (8-4-4-4-12 hexadecimal digits, e.g. 0190b4a2-6f0e-7c3a-9d1e-3b5f8a2c4d6e)");
      break;
    case KeyFormatKind::ulid:
      if (!is_ulid(key)) {
        return std::string(
            "be a ULID (26 characters of Crockford's base32, the first 0-7, e.g. 01ARZ3NDEKTSV4RRFFQ69G5FAV)");
      }
      break;
    case KeyFormatKind::regex:
      // A format without its compiled pattern cannot be checked: refused rather than let through.
      if (format.compiled == nullptr || !format.compiled->matches(key))
        return "match the regular expression " + format.pattern;
      break;
  }
  if (key.size() < min_length) return "be at least " + std::to_string(min_length) + " characters long";
  return std::nullopt;
}

}  // namespace idem::core
