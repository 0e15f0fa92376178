#pragma once
// The form a route's owner requires of its idempotency keys: the draft leaves a key's format to
// the resource owner (draft-ietf-httpapi-idempotency-key-header §2.1) and recommends UUIDs.
// Parsed from the route's `key_format` at config load (a regular expression is compiled there,
// once); checked on every key, read from the key header or the JSON body alike.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace idem::core {

enum class KeyFormatKind {
  any,    // only the key syntax and the lengths (the default)
  uuid,   // RFC 9562 §4 textual form: 8-4-4-4-12 hex digits, either case, any version and variant
  ulid,   // 26 characters of Crockford's base32, either case, the first 0-7
  regex,  // a full match of an ECMAScript regular expression
};

// The compiled regular expression (key_format.cpp): <regex> stays out of this header, which
// every file that sees a route includes.
class KeyPattern;

struct KeyFormat {
  KeyFormatKind kind = KeyFormatKind::any;
  std::string pattern;                         // the regular expression, when kind is regex
  std::shared_ptr<const KeyPattern> compiled;  // from pattern; shared by the copies of a route
};

// "any", "uuid", "ulid" or "regex:<ECMAScript regular expression>", or why the text is none of
// them (e.g. "unbalanced parentheses in the regular expression").
std::variant<KeyFormat, std::string> parse_key_format(std::string_view text);

// The one length every key of the format has (uuid 36, ulid 26), for the config's check against
// the route's length bounds.
std::optional<std::size_t> key_format_length(const KeyFormat& format);

// The rule `key` breaks, as the end of the sentence "the key must ...": "be a UUID (…)", "match
// the regular expression ^[a-z]+$", "be at least 16 characters long"; nullopt when it breaks
// none. The format is checked before the minimum length, being the more useful to name.
std::optional<std::string> broken_key_rule(std::string_view key, std::size_t min_length, const KeyFormat& format);

}  // namespace idem::core
