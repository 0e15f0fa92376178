#pragma once
// Parsing of the Idempotency-Key request header (draft-ietf-httpapi-idempotency-key-header).
// The draft makes the value a Structured Field sf-string ("..."); the bare token form is accepted
// too and names the same key: `"abc"` and `abc` are one key.
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace idem::core {

enum class KeyError {
  missing,    // no key header in the request
  empty,      // header present, value empty ("" or blank)
  too_long,   // decoded key longer than the route's max_key_length
  malformed,  // not an sf-string nor a token (bad quoting, control chars, spaces in bare form...)
  multiple,   // more than one key header field, or a list value ("a", "b")
};

// Short machine name ("missing", "too_long"...) used in problem types and metrics labels.
std::string_view key_error_name(KeyError error);
// Human sentence for the problem+json detail, e.g. "the Idempotency-Key header is longer than 255 characters".
std::string key_error_detail(KeyError error, std::string_view header_name, std::size_t max_length);
// The detail for a header key that breaks the route's key rule (core/key_format.hpp), e.g. "the
// Idempotency-Key header must be a UUID (…)"; its problem is malformed's.
std::string key_rule_detail(std::string_view header_name, std::string_view rule);

// `field_values` holds every field line of the key header, in order (Beast's equal_range).
// Returns the decoded key (quotes and escapes removed) or the reason it is unacceptable.
std::variant<std::string, KeyError> parse_idempotency_key(const std::vector<std::string_view>& field_values,
                                                          std::size_t max_length);

}  // namespace idem::core
