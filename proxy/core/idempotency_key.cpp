#include "core/idempotency_key.hpp"

#include <optional>
#include <utility>

#include "core/ascii.hpp"

namespace idem::core {
namespace {

// One parsed key and whatever follows it in the field value.
struct ParsedItem {
  std::string key;
  std::string_view rest;
};

// RFC 8941 §3.3.3 sf-string: printable ASCII between double quotes; only \" and \\ are escapes.
// `value` starts with the opening quote.
std::optional<ParsedItem> parse_sf_string(std::string_view value) {
  // Keys without escapes (nearly all) are copied at once, not a character at a time.
  std::size_t plain = 1;
  while (plain < value.size() && value[plain] != '"' && value[plain] != '\\' &&
         static_cast<unsigned char>(value[plain]) >= 0x20 && static_cast<unsigned char>(value[plain]) <= 0x7E) {
    ++plain;
  }
  if (plain < value.size() && value[plain] == '"') {
    return ParsedItem{std::string(value.substr(1, plain - 1)), value.substr(plain + 1)};
  }
  std::string key;
  for (std::size_t i = 1; i < value.size(); ++i) {
    auto c = static_cast<unsigned char>(value[i]);
    if (c == '"') return ParsedItem{std::move(key), value.substr(i + 1)};
    if (c < 0x20 || c > 0x7E) return std::nullopt;
    if (c == '\\') {
      if (++i == value.size() || (value[i] != '"' && value[i] != '\\')) return std::nullopt;
      c = static_cast<unsigned char>(value[i]);
    }
    key.push_back(static_cast<char>(c));
  }
  return std::nullopt;  // no closing quote
}

// The bare form: visible ASCII without the characters that delimit quoting, lists and parameters.
constexpr bool is_bare_key_char(unsigned char c) {
  return c >= 0x21 && c <= 0x7E && c != '"' && c != ',' && c != ';' && c != '\\';
}

std::optional<ParsedItem> parse_bare_key(std::string_view value) {
  std::size_t length = 0;
  while (length < value.size() && is_bare_key_char(static_cast<unsigned char>(value[length]))) ++length;
  if (length == 0) return std::nullopt;
  return ParsedItem{std::string(value.substr(0, length)), value.substr(length)};
}

}  // namespace

std::string_view key_error_name(KeyError error) {
  switch (error) {
    case KeyError::missing: return "missing";
    case KeyError::empty: return "empty";
    case KeyError::too_long: return "too_long";
    case KeyError::malformed: return "malformed";
    case KeyError::multiple: return "multiple";
  }
  return "invalid";
}

std::string key_error_detail(KeyError error, std::string_view header_name, std::size_t max_length) {
  const std::string header = "the " + std::string(header_name) + " header";
  switch (error) {
    case KeyError::missing: return header + " is required on this route and was not sent";
    case KeyError::empty: return header + " is empty";
    case KeyError::too_long: return header + " is longer than " + std::to_string(max_length) + " characters";
    case KeyError::malformed:
      return header + " must be a quoted string (\"...\") or a single token of visible ASCII characters";
    case KeyError::multiple: return header + " must be sent exactly once, with a single key";
  }
  return header + " is invalid";
}

std::variant<std::string, KeyError> parse_idempotency_key(const std::vector<std::string_view>& field_values,
                                                          std::size_t max_length) {
  if (field_values.empty()) return KeyError::missing;
  if (field_values.size() > 1) return KeyError::multiple;

  const std::string_view value = ascii::trim_ows(field_values.front());
  if (value.empty()) return KeyError::empty;

  std::optional<ParsedItem> item = value.front() == '"' ? parse_sf_string(value) : parse_bare_key(value);
  if (!item) return KeyError::malformed;
  if (const std::string_view rest = ascii::trim_ows(item->rest); !rest.empty()) {
    // A comma followed by another member is a list, i.e. several keys. Anything else after the
    // key (parameters, stray characters, a trailing comma) makes the value invalid.
    const bool another_member = rest.front() == ',' && !ascii::trim_ows(rest.substr(1)).empty();
    return another_member ? KeyError::multiple : KeyError::malformed;
  }
  if (item->key.empty()) return KeyError::empty;
  if (item->key.size() > max_length) return KeyError::too_long;
  return std::move(item->key);
}

}  // namespace idem::core
