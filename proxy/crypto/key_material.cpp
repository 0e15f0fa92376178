#include "crypto/key_material.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstdint>

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

// Both alphabets: "+/" (RFC 4648 §4) and "-_" (§5).
int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
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

std::optional<std::string> decode_base64(std::string_view text) {
  // Padding: at most two '=', only at the end, and then the length is a multiple of 4.
  const std::size_t unpadded = text.find_last_not_of('=') + 1;
  const std::size_t padding = text.size() - unpadded;
  if (padding > 2 || (padding > 0 && text.size() % 4 != 0)) return std::nullopt;
  text = text.substr(0, unpadded);
  if (text.size() % 4 == 1) return std::nullopt;  // 6 bits cannot end a byte string

  std::string bytes;
  bytes.reserve(text.size() * 3 / 4);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (const char c : text) {
    const int value = base64_value(c);
    if (value < 0) {
      OPENSSL_cleanse(bytes.data(), bytes.size());
      return std::nullopt;
    }
    buffer = (buffer << 6) | static_cast<std::uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return bytes;
}

}  // namespace

ParsedKey parse_key_material(std::string_view text) {
  text = trim(text);
  if (text.empty()) return {std::nullopt, "the key is empty; " + std::string(kExpected)};

  const bool hex = text.size() % 2 == 0 && std::all_of(text.begin(), text.end(), [](char c) { return hex_value(c) >= 0; });
  std::optional<std::string> bytes = hex ? std::optional<std::string>(decode_hex(text)) : decode_base64(text);
  if (!bytes) return {std::nullopt, "the key is neither hex nor base64; " + std::string(kExpected)};

  ParsedKey parsed;
  if (bytes->size() != kAeadKeyBytes) {
    parsed.problem = "the key decodes (as " + std::string(hex ? "hex" : "base64") + ") to " + std::to_string(bytes->size()) +
                     " bytes; " + std::string(kExpected);
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
