#include "crypto/base64.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdint>

namespace idem::crypto {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
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

}  // namespace idem::crypto
