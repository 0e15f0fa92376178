#include "crypto/key_material.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstdint>

#include "crypto/base64.hpp"

namespace idem::crypto {
namespace {

constexpr std::string_view kExpected =
    "a key must be exactly 32 bytes, written as 64 hex digits or 44 base64 characters (e.g. `openssl rand -base64 32`)";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `text` holds an even number of hex digits.
std::string decode_hex(std::string_view text) {
  std::string bytes;
  bytes.reserve(text.size() / 2);
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    bytes.push_back(static_cast<char>((hex_value(text[i]) << 4) | hex_value(text[i + 1])));
  }
  return bytes;
}

}  // namespace

ParsedKey parse_key_material(std::string_view text) {
  text = trim(text);
  if (text.empty()) return {std::nullopt, "the key is empty; " + std::string(kExpected)};

  const bool hex =
      text.size() % 2 == 0 && std::all_of(text.begin(), text.end(), [](char c) { return hex_value(c) >= 0; });
  std::optional<std::string> bytes = hex ? std::optional<std::string>(decode_hex(text)) : base64_decode(text);
  if (!bytes) return {std::nullopt, "the key is neither hex nor base64; " + std::string(kExpected)};

  ParsedKey parsed;
  if (bytes->size() != kAeadKeyBytes) {
    parsed.problem = "the key decodes (as " + std::string(hex ? "hex" : "base64") + ") to " +
                     std::to_string(bytes->size()) + " bytes; " + std::string(kExpected);
  } else {
    AeadKey key{};
    std::copy(bytes->begin(), bytes->end(), key.begin());
    parsed.key = key;
  }
  std::string& decoded = *bytes;
  OPENSSL_cleanse(decoded.data(), decoded.size());
  return parsed;
}

void wipe_secret(std::string& text) {
  OPENSSL_cleanse(text.data(), text.size());
  text.clear();
}

}  // namespace idem::crypto
