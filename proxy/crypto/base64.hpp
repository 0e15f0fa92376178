#pragma once
// Base64 (RFC 4648), once for the whole project: key material, webhook secrets and signatures.
#include <optional>
#include <string>
#include <string_view>

namespace idem::crypto {

// The standard alphabet, padded.
std::string base64_encode(std::string_view bytes);

// Either alphabet ("+/" §4 or "-_" §5), padding optional; nullopt for anything else (a character
// outside the alphabet, whitespace included, more than two '=', '=' not at the end, a padded text
// whose length is not a multiple of 4, a length that cannot end a byte string). A decoder that
// fails part-way wipes what it decoded so far: callers decode keys.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace idem::crypto
