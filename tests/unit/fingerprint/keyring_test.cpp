// Record encryption keyring and key text parsing (proxy/crypto/keyring, key_material).
#include <gtest/gtest.h>

#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

#include "crypto/key_material.hpp"
#include "crypto/keyring.hpp"

namespace idem::crypto {
namespace {

AeadKey filled(std::uint8_t byte) {
  AeadKey key{};
  key.fill(byte);
  return key;
}

// 32 bytes 0x00..0x1f in both spellings.
constexpr std::string_view kCountingHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
constexpr std::string_view kCountingBase64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

AeadKey counting() {
  AeadKey key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(i);
  return key;
}

TEST(Keyring, FindsEveryKeyAndKnowsTheCurrentOne) {
  const Keyring keyring("k2", {{"k1", filled(1)}, {"k2", filled(2)}});
  EXPECT_EQ(keyring.current_id(), "k2");
  EXPECT_EQ(keyring.current_key(), filled(2));
  ASSERT_NE(keyring.find("k1"), nullptr);
  EXPECT_EQ(*keyring.find("k1"), filled(1));
  EXPECT_EQ(keyring.find("k3"), nullptr);
  EXPECT_EQ(keyring.find(""), nullptr);
  EXPECT_EQ(keyring.size(), 2u);
}

TEST(Keyring, RejectsDuplicateInvalidOrMissingIds) {
  EXPECT_THROW(Keyring("k1", {{"k1", filled(1)}, {"k1", filled(2)}}), std::invalid_argument);
  EXPECT_THROW(Keyring("k1", {{"k1", filled(1)}, {"bad id", filled(2)}}), std::invalid_argument);
  EXPECT_THROW(Keyring("k9", {{"k1", filled(1)}}), std::invalid_argument);
  EXPECT_THROW(Keyring("", {}), std::invalid_argument);
}

TEST(KeyId, PlainNamesUpTo64Characters) {
  EXPECT_TRUE(is_valid_key_id("k1"));
  EXPECT_TRUE(is_valid_key_id("2026-01_primary.v2"));
  EXPECT_TRUE(is_valid_key_id(std::string(64, 'a')));
  EXPECT_FALSE(is_valid_key_id(std::string(65, 'a')));
  EXPECT_FALSE(is_valid_key_id(""));
  EXPECT_FALSE(is_valid_key_id("k;1"));
  EXPECT_FALSE(is_valid_key_id("k=1"));
  EXPECT_FALSE(is_valid_key_id("k 1"));
}

TEST(KeyMaterial, HexInEitherCase) {
  EXPECT_EQ(parse_key_material(kCountingHex).key, counting());
  std::string upper(kCountingHex);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(parse_key_material(upper).key, counting());
}

TEST(KeyMaterial, Base64PaddedUnpaddedAndUrlSafe) {
  EXPECT_EQ(parse_key_material(kCountingBase64).key, counting());
  EXPECT_EQ(parse_key_material(kCountingBase64.substr(0, 43)).key, counting());
  // 0xfb 0xff ... uses '+' and '/' in the standard alphabet, '-' and '_' in the URL-safe one.
  AeadKey high{};
  high.fill(0xfb);
  high[1] = 0xff;
  const std::string standard = "+//7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/s=";
  const std::string url_safe = "-__7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s=";
  EXPECT_EQ(parse_key_material(standard).key, high) << parse_key_material(standard).problem;
  EXPECT_EQ(parse_key_material(url_safe).key, high) << parse_key_material(url_safe).problem;
}

TEST(KeyMaterial, SurroundingWhitespaceIsIgnored) {
  EXPECT_EQ(parse_key_material(std::string(kCountingBase64) + "\n").key, counting());
  EXPECT_EQ(parse_key_material("  " + std::string(kCountingHex) + "\r\n").key, counting());
}

TEST(KeyMaterial, WrongLengthsAndEncodingsAreRefusedWithoutQuotingTheText) {
  const std::string secretish = "c2VjcmV0LXNlY3JldC1zZWNyZXQ=";  // 20 bytes of base64
  const std::vector<std::string> bad = {
      "",
      "   \n",
      std::string(kCountingHex.substr(0, 62)),            // 31 bytes of hex
      std::string(kCountingHex) + "00",                    // 33 bytes of hex
      secretish,                                           // 20 bytes
      std::string(kCountingBase64.substr(0, 40)) + "!!!=",  // not base64
      std::string(kCountingBase64) + "=",                  // three '='
      "A===",
      std::string(kCountingBase64.substr(0, 42)),          // 42 chars: not a whole byte string of 32
      "AAECAwQFBgcICQoLDA0ODxAR EhMUFRYXGBkaGxwdHh8=",     // inner space
  };
  for (const std::string& text : bad) {
    const ParsedKey parsed = parse_key_material(text);
    EXPECT_FALSE(parsed.key.has_value()) << text;
    EXPECT_NE(parsed.problem.find("32 bytes"), std::string::npos) << parsed.problem;
    if (text.size() > 4) {
      EXPECT_EQ(parsed.problem.find(text), std::string::npos) << parsed.problem;
    }
  }
  EXPECT_NE(parse_key_material(secretish).problem.find("to 20 bytes"), std::string::npos);
}

}  // namespace
}  // namespace idem::crypto
