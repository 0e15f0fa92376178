#pragma once
// Text form of a 256-bit key, as an operator keeps it in a file or an environment variable:
// 64 hex digits, or base64 (standard or URL-safe alphabet, padding optional), e.g. the output of
// `openssl rand -base64 32` or `openssl rand -hex 32`.
#include <optional>
#include <string>
#include <string_view>

#include "crypto/aead.hpp"

namespace idem::crypto {

struct ParsedKey {
  std::optional<AeadKey> key;
  std::string problem;  // why `key` is empty; never quotes the text (it may be a near-miss secret)
};

// Surrounding whitespace (a file's trailing newline) is ignored. Text made only of an even number
// of hex digits is read as hex, anything else as base64; either way it must decode to exactly 32
// bytes.
ParsedKey parse_key_material(std::string_view text);

// Overwrites `text` (in a way the compiler keeps) and empties it: for buffers that held key text.
void wipe_secret(std::string& text);

}  // namespace idem::crypto
