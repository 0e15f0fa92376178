// Fuzzes the Idempotency-Key header parser (core/idempotency_key).
// Input: one byte choosing the route's max_key_length (1-256), then the header's field lines
// separated by '\n' (nothing after the first byte: the header is missing).
#include <algorithm>
#include <string>
#include <variant>

#include "core/idempotency_key.hpp"
#include "fuzz_support.hpp"

namespace {

using idem::core::KeyError;
using idem::core::parse_idempotency_key;

constexpr bool is_token_char(char c) { return c > 0x20 && c < 0x7F && c != '"' && c != ',' && c != ';' && c != '\\'; }

// The key written as an RFC 8941 sf-string.
std::string quoted(const std::string& key) {
  std::string text = "\"";
  for (const char c : key) {
    if (c == '"' || c == '\\') text.push_back('\\');
    text.push_back(c);
  }
  text.push_back('"');
  return text;
}

const std::string* key_of(const std::variant<std::string, KeyError>& result) { return std::get_if<std::string>(&result); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t max_length = 1 + std::size_t{data[0]};
  const std::vector<std::string_view> fields = idem::fuzz::split(idem::fuzz::as_text(data + 1, size - 1), '\n');

  const auto result = parse_idempotency_key(fields, max_length);
  if (const auto* error = std::get_if<KeyError>(&result)) {
    IDEM_FUZZ_CHECK(!idem::core::key_error_name(*error).empty());
    IDEM_FUZZ_CHECK(!idem::core::key_error_detail(*error, "Idempotency-Key", max_length).empty());
    IDEM_FUZZ_CHECK((*error == KeyError::missing) == fields.empty());
    IDEM_FUZZ_CHECK(*error != KeyError::multiple || !fields.empty());
    return 0;
  }

  const std::string& key = std::get<std::string>(result);
  IDEM_FUZZ_CHECK(fields.size() == 1);
  IDEM_FUZZ_CHECK(!key.empty() && key.size() <= max_length);
  // A decoded key is printable ASCII: it lands in logs and in the store's scope.
  IDEM_FUZZ_CHECK(std::all_of(key.begin(), key.end(), [](char c) { return c >= 0x20 && c < 0x7F; }));

  // The same key re-encoded parses back to itself: quoted, padded with OWS, and bare when it can be.
  const std::string as_sf_string = quoted(key);
  const auto requoted = parse_idempotency_key({as_sf_string}, max_length);
  IDEM_FUZZ_CHECK(key_of(requoted) != nullptr && *key_of(requoted) == key);
  const std::string padded = " \t" + as_sf_string + "\t ";
  const auto trimmed = parse_idempotency_key({padded}, max_length);
  IDEM_FUZZ_CHECK(key_of(trimmed) != nullptr && *key_of(trimmed) == key);
  if (std::all_of(key.begin(), key.end(), is_token_char)) {
    const auto bare = parse_idempotency_key({key}, max_length);
    IDEM_FUZZ_CHECK(key_of(bare) != nullptr && *key_of(bare) == key);
  }
  // One character shorter a limit refuses it as too long, never as anything else.
  const auto tighter = parse_idempotency_key({as_sf_string}, key.size() - 1);
  IDEM_FUZZ_CHECK(std::get_if<KeyError>(&tighter) != nullptr && std::get<KeyError>(tighter) == KeyError::too_long);
  // Sent twice, it is two keys.
  const auto twice = parse_idempotency_key({fields.front(), fields.front()}, max_length);
  IDEM_FUZZ_CHECK(std::get_if<KeyError>(&twice) != nullptr && std::get<KeyError>(twice) == KeyError::multiple);
  return 0;
}
