#pragma once
// Where a route reads a request's idempotency key: its key header, or a string in its JSON body
// (webhook and queue deliveries carry their id there, e.g. {"id":"evt_123",...}). Decisions
// only; the body is read by the fingerprint's one parse (fingerprint/canonical_json.hpp).
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include "core/idempotency_key.hpp"

namespace idem::core {

enum class KeySource {
  header,            // the key header only
  header_then_json,  // the key header when sent, else the body's key_from_json
  json,              // the body's key_from_json only (a key header is not read)
};
std::string_view key_source_name(KeySource source);

enum class KeyOrigin { header, json_body };
KeyOrigin key_origin(KeySource source, bool header_sent);

// What the route's JSON Pointer addresses in the request body.
enum class JsonKind { not_json, absent, null, boolean, number, string, array, object };
struct BodyKeyLookup {
  JsonKind kind = JsonKind::not_json;  // not_json: the body is not JSON-typed, or does not parse
  std::string value;                   // the decoded string when kind == string
};

// The key the lookup found, or why it is unacceptable, as for a header key: missing (the pointer
// addresses nothing), empty, too_long, malformed (not JSON, not a string, or a control character,
// which no header key can hold either).
std::variant<std::string, KeyError> body_key(const BodyKeyLookup& lookup, std::size_t max_length);

// Human sentence for the problem+json detail, e.g. "the JSON body's /id is a number, not a string".
std::string body_key_error_detail(KeyError error, const BodyKeyLookup& lookup, std::string_view pointer,
                                  std::size_t max_length);
// The detail for a body key that breaks the route's key rule (core/key_format.hpp), e.g. "the
// JSON body's /id (the idempotency key) must be a UUID (…)"; its problem is malformed's.
std::string body_key_rule_detail(std::string_view pointer, std::string_view rule);

}  // namespace idem::core
