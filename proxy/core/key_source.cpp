#include "core/key_source.hpp"

#include <algorithm>

namespace idem::core {
namespace {

std::string_view kind_phrase(JsonKind kind) {
  switch (kind) {
    case JsonKind::null: return "null";
    case JsonKind::boolean: return "a boolean";
    case JsonKind::number: return "a number";
    case JsonKind::array: return "an array";
    case JsonKind::object: return "an object";
    case JsonKind::string: return "a string";
    case JsonKind::not_json:
    case JsonKind::absent: break;
  }
  return "not a string";
}

bool has_control_character(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7F;
  });
}

}  // namespace

std::string_view key_source_name(KeySource source) {
  switch (source) {
    case KeySource::header: return "header";
    case KeySource::header_then_json: return "header_then_json";
    case KeySource::json: return "json";
  }
  return "header";
}

KeyOrigin key_origin(KeySource source, bool header_sent) {
  switch (source) {
    case KeySource::header: return KeyOrigin::header;
    case KeySource::header_then_json: return header_sent ? KeyOrigin::header : KeyOrigin::json_body;
    case KeySource::json: return KeyOrigin::json_body;
  }
  return KeyOrigin::header;
}

std::variant<std::string, KeyError> body_key(const BodyKeyLookup& lookup, std::size_t max_length) {
  switch (lookup.kind) {
    case JsonKind::absent: return KeyError::missing;
    case JsonKind::string: break;
    default: return KeyError::malformed;
  }
  if (lookup.value.empty()) return KeyError::empty;
  if (lookup.value.size() > max_length) return KeyError::too_long;
  if (has_control_character(lookup.value)) return KeyError::malformed;
  return lookup.value;
}

std::string body_key_error_detail(KeyError error, const BodyKeyLookup& lookup, std::string_view pointer,
                                  std::size_t max_length) {
  const std::string member = "the JSON body's " + std::string(pointer);
  if (lookup.kind == JsonKind::not_json) {
    return "this route reads the idempotency key from " + member +
           ", and the body is not JSON (it needs Content-Type application/json or *+json and a valid JSON text)";
  }
  switch (error) {
    case KeyError::missing: return member + " holds the idempotency key on this route and the body has none";
    case KeyError::empty: return member + " (the idempotency key) is empty";
    case KeyError::too_long:
      return member + " (the idempotency key) is longer than " + std::to_string(max_length) + " bytes";
    case KeyError::malformed:
      if (lookup.kind != JsonKind::string)
        return member + " (the idempotency key) is " + std::string(kind_phrase(lookup.kind)) + ", not a string";
      return member + " (the idempotency key) holds a control character";
    case KeyError::multiple: break;
  }
  return member + " is not a usable idempotency key";
}

std::string body_key_rule_detail(std::string_view pointer, std::string_view rule) {
  return "the JSON body's " + std::string(pointer) + " (the idempotency key) must " + std::string(rule);
}

}  // namespace idem::core
