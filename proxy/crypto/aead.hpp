#pragma once
// AES-256-GCM (authenticated encryption with associated data) over OpenSSL EVP.
//
// A (key, nonce) pair must never encrypt two messages: callers take a fresh random_nonce() for
// every seal. With 96-bit random nonces a key stays safe for about 2^32 seals (NIST SP 800-38D
// §8.3); rotate keys long before that.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::crypto {

inline constexpr std::size_t kAeadKeyBytes = 32;
inline constexpr std::size_t kAeadNonceBytes = 12;
inline constexpr std::size_t kAeadTagBytes = 16;

using AeadKey = std::array<std::uint8_t, kAeadKeyBytes>;
using AeadNonce = std::array<std::uint8_t, kAeadNonceBytes>;

// 96 random bits from OpenSSL's CSPRNG; nullopt only when the CSPRNG fails.
std::optional<AeadNonce> random_nonce();

// Encrypts `plaintext` and authenticates it together with `aad` (not encrypted, not included in
// the output). Returns ciphertext || 16-byte tag (ciphertext is as long as the plaintext);
// nullopt only when OpenSSL itself fails.
std::optional<std::string> seal(const AeadKey& key, const AeadNonce& nonce, std::string_view aad,
                                std::string_view plaintext);

// The inverse of seal(): nullopt when the tag does not authenticate (wrong key, nonce or AAD, or
// any altered byte) or the input is shorter than a tag. Nothing of an unauthenticated plaintext
// is ever returned.
std::optional<std::string> open(const AeadKey& key, const AeadNonce& nonce, std::string_view aad,
                                std::string_view ciphertext_and_tag);

}  // namespace idem::crypto
