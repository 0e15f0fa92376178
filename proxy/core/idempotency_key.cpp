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

constexpr bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// RFC 9110 tchar: the characters of a token.
constexpr bool is_tchar(char c) {
  return is_alpha(c) || ascii::is_digit(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// The length of the RFC 8941 §3.3 bare-item at the start of `text` (integer, decimal, string,
// token, byte sequence or boolean), or 0 when none starts there.
std::size_t bare_item_length(std::string_view text) {
  if (text.empty()) return 0;
  const char first = text.front();
  if (first == '"') {
    const std::optional<ParsedItem> string = parse_sf_string(text);
    return string ? text.size() - string->rest.size() : 0;
  }
  if (first == '?') return text.size() >= 2 && (text[1] == '0' || text[1] == '1') ? 2 : 0;
  if (first == ':') {
    std::size_t end = 1;
    while (end < text.size() && (is_alpha(text[end]) || ascii::is_digit(text[end]) || text[end] == '+' ||
                                 text[end] == '/' || text[end] == '=')) {
      ++end;
    }
    return end < text.size() && text[end] == ':' ? end + 1 : 0;
  }
  if (first == '*' || is_alpha(first)) {
    std::size_t end = 1;
    while (end < text.size() && (is_tchar(text[end]) || text[end] == ':' || text[end] == '/')) ++end;
    return end;
  }
  // sf-integer (up to 15 digits) or sf-decimal (up to 12 digits, '.', 1 to 3 digits).
  std::size_t at = first == '-' ? 1 : 0;
  const std::size_t digits_start = at;
  while (at < text.size() && ascii::is_digit(text[at])) ++at;
  const std::size_t integer_digits = at - digits_start;
  if (integer_digits == 0) return 0;
  if (at == text.size() || text[at] != '.') return integer_digits <= 15 ? at : 0;
  const std::size_t fraction_start = ++at;
  while (at < text.size() && ascii::is_digit(text[at])) ++at;
  const std::size_t fraction_digits = at - fraction_start;
  return integer_digits <= 12 && fraction_digits >= 1 && fraction_digits <= 3 ? at : 0;
}

// RFC 8941 §3.1.2 parameters after an item (`;p=1;q`): skipped, as the key does not depend on
// them. What follows them, or nullopt when they are malformed.
std::optional<std::string_view> skip_parameters(std::string_view rest) {
  while (!rest.empty() && rest.front() == ';') {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    // key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )
    const auto lcalpha = [](char c) { return c >= 'a' && c <= 'z'; };
    if (rest.empty() || !(lcalpha(rest.front()) || rest.front() == '*')) return std::nullopt;
    std::size_t key_end = 1;
    while (key_end < rest.size() && (lcalpha(rest[key_end]) || ascii::is_digit(rest[key_end]) ||
                                     std::string_view("_-.*").find(rest[key_end]) != std::string_view::npos)) {
      ++key_end;
    }
    rest.remove_prefix(key_end);
    if (!rest.empty() && rest.front() == '=') {  // no value: the parameter is boolean true
      rest.remove_prefix(1);
      const std::size_t value = bare_item_length(rest);
      if (value == 0) return std::nullopt;
      rest.remove_prefix(value);
    }
  }
  return rest;
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

std::string key_rule_detail(std::string_view header_name, std::string_view rule) {
  return "the " + std::string(header_name) + " header must " + std::string(rule);
}

std::variant<std::string, KeyError> parse_idempotency_key(const std::vector<std::string_view>& field_values,
                                                          std::size_t max_length) {
  if (field_values.empty()) return KeyError::missing;
  if (field_values.size() > 1) return KeyError::multiple;

  const std::string_view value = ascii::trim_ows(field_values.front());
  if (value.empty()) return KeyError::empty;

  std::optional<ParsedItem> item = value.front() == '"' ? parse_sf_string(value) : parse_bare_key(value);
  if (!item) return KeyError::malformed;
  // Parameters (`"k";p=1`) are part of the item, as the sf-string grammar allows: ignored.
  const std::optional<std::string_view> after_parameters = skip_parameters(item->rest);
  if (!after_parameters) return KeyError::malformed;
  if (const std::string_view rest = ascii::trim_ows(*after_parameters); !rest.empty()) {
    // A comma followed by another member is a list, i.e. several keys. Anything else after the
    // key (stray characters, a trailing comma) makes the value invalid.
    const bool another_member = rest.front() == ',' && !ascii::trim_ows(rest.substr(1)).empty();
    return another_member ? KeyError::multiple : KeyError::malformed;
  }
  if (item->key.empty()) return KeyError::empty;
  if (item->key.size() > max_length) return KeyError::too_long;
  return std::move(item->key);
}

}  // namespace idem::core
