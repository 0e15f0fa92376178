// AES-256-GCM over OpenSSL EVP (proxy/crypto/aead).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "crypto/aead.hpp"

namespace idem::crypto {
namespace {

std::string from_hex(std::string_view hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return bytes;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const char c : bytes) {
    hex.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
    hex.push_back(kDigits[static_cast<unsigned char>(c) & 0x0f]);
  }
  return hex;
}

AeadKey key_with(std::uint8_t seed) {
  AeadKey key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(seed + i * 7);
  return key;
}

AeadNonce nonce_with(std::uint8_t seed) {
  AeadNonce nonce{};
  for (std::size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<std::uint8_t>(seed ^ (i * 31));
  return nonce;
}

const std::string kAad = "idemproxy-record-v1|scope|key";
// A body with a NUL and a non-UTF-8 byte inside; sizeof keeps every byte but the terminator.
constexpr char kPlaintextBytes[] = "{\"order\":\"ord_42\",\"card\":\"4111\"}\0\xff tail";
const std::string kPlaintext(kPlaintextBytes, sizeof kPlaintextBytes - 1);

// The GCM specification's test cases 13 and 14 (McGrew & Viega): AES-256, all-zero key and IV.
TEST(Aead, KnownVectorEmptyPlaintext) {
  const auto sealed = seal(AeadKey{}, AeadNonce{}, "", "");
  ASSERT_TRUE(sealed.has_value());
  EXPECT_EQ(to_hex(*sealed), "530f8afbc74536b9a963b4f1c4cb738b");
}

TEST(Aead, KnownVectorOneZeroBlock) {
  const auto sealed = seal(AeadKey{}, AeadNonce{}, "", std::string(16, '\0'));
  ASSERT_TRUE(sealed.has_value());
  EXPECT_EQ(to_hex(*sealed), "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919");
  const auto opened = open(AeadKey{}, AeadNonce{}, "", from_hex("cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919"));
  ASSERT_TRUE(opened.has_value());
  EXPECT_EQ(*opened, std::string(16, '\0'));
}

TEST(Aead, RoundTripKeepsEveryByte) {
  const auto sealed = seal(key_with(1), nonce_with(2), kAad, kPlaintext);
  ASSERT_TRUE(sealed.has_value());
  EXPECT_EQ(sealed->size(), kPlaintext.size() + kAeadTagBytes);
  EXPECT_EQ(sealed->find("ord_42"), std::string::npos);
  const auto opened = open(key_with(1), nonce_with(2), kAad, *sealed);
  ASSERT_TRUE(opened.has_value());
  EXPECT_EQ(*opened, kPlaintext);
}

TEST(Aead, EmptyPlaintextStillAuthenticatesTheAad) {
  const auto sealed = seal(key_with(1), nonce_with(2), kAad, "");
  ASSERT_TRUE(sealed.has_value());
  EXPECT_EQ(sealed->size(), kAeadTagBytes);
  EXPECT_EQ(open(key_with(1), nonce_with(2), kAad, *sealed), std::optional<std::string>(""));
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad + "x", *sealed).has_value());
}

TEST(Aead, MebibyteRoundTrip) {
  std::string big(1024 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  const auto sealed = seal(key_with(9), nonce_with(9), kAad, big);
  ASSERT_TRUE(sealed.has_value());
  const auto opened = open(key_with(9), nonce_with(9), kAad, *sealed);
  ASSERT_TRUE(opened.has_value());
  EXPECT_EQ(*opened, big);
}

TEST(Aead, AnyFlippedBitOfCiphertextOrTagFailsToOpen) {
  const std::string sealed = seal(key_with(1), nonce_with(2), kAad, kPlaintext).value();
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    for (const unsigned char mask : {0x01, 0x80}) {
      std::string tampered = sealed;
      tampered[i] = static_cast<char>(tampered[i] ^ mask);
      EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad, tampered).has_value()) << "byte " << i;
    }
  }
}

TEST(Aead, AnyChangedNonceByteFailsToOpen) {
  const std::string sealed = seal(key_with(1), nonce_with(2), kAad, kPlaintext).value();
  for (std::size_t i = 0; i < kAeadNonceBytes; ++i) {
    AeadNonce nonce = nonce_with(2);
    nonce[i] ^= 0x01;
    EXPECT_FALSE(open(key_with(1), nonce, kAad, sealed).has_value()) << "nonce byte " << i;
  }
}

TEST(Aead, AnyChangedAadFailsToOpen) {
  const std::string sealed = seal(key_with(1), nonce_with(2), kAad, kPlaintext).value();
  for (std::size_t i = 0; i < kAad.size(); ++i) {
    std::string aad = kAad;
    aad[i] = static_cast<char>(aad[i] ^ 0x20);
    EXPECT_FALSE(open(key_with(1), nonce_with(2), aad, sealed).has_value()) << "aad byte " << i;
  }
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad + std::string(1, '\0'), sealed).has_value());
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad.substr(1), sealed).has_value());
  EXPECT_FALSE(open(key_with(1), nonce_with(2), "", sealed).has_value());
}

TEST(Aead, WrongKeyFailsToOpen) {
  const std::string sealed = seal(key_with(1), nonce_with(2), kAad, kPlaintext).value();
  AeadKey other = key_with(1);
  other[31] ^= 0x01;
  EXPECT_FALSE(open(other, nonce_with(2), kAad, sealed).has_value());
}

TEST(Aead, TruncatedOrExtendedInputFailsToOpen) {
  const std::string sealed = seal(key_with(1), nonce_with(2), kAad, kPlaintext).value();
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad, "").has_value());
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad, sealed.substr(0, kAeadTagBytes - 1)).has_value());
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad, sealed.substr(0, sealed.size() - 1)).has_value());
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad, sealed.substr(1)).has_value());
  EXPECT_FALSE(open(key_with(1), nonce_with(2), kAad, sealed + "x").has_value());
}

TEST(Aead, RandomNoncesAreDistinctAndSoAreTheirCiphertexts) {
  std::set<AeadNonce> nonces;
  std::set<std::string> ciphertexts;
  for (int i = 0; i < 1000; ++i) {
    const auto nonce = random_nonce();
    ASSERT_TRUE(nonce.has_value());
    nonces.insert(*nonce);
    ciphertexts.insert(seal(key_with(3), *nonce, kAad, kPlaintext).value());
  }
  EXPECT_EQ(nonces.size(), 1000u);
  EXPECT_EQ(ciphertexts.size(), 1000u);
}

}  // namespace
}  // namespace idem::crypto
