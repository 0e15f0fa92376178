// SHA-256 and token generation over OpenSSL EVP (proxy/crypto).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>
#include <string>

#include "crypto/sha256.hpp"

namespace idem::crypto {
namespace {

// FIPS 180-2 test vectors.
TEST(Sha256, AbcKnownVector) {
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, EmptyInputKnownVector) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, TwoBlockKnownVector) {
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalUpdatesEqualOneShot) {
  const std::string million_a(1'000'000, 'a');
  Sha256 hasher;
  for (std::size_t offset = 0; offset < million_a.size(); offset += 4096) {
    hasher.update(std::string_view(million_a).substr(offset, 4096));
  }
  const Digest incremental = hasher.finish();
  EXPECT_EQ(incremental, sha256(million_a));
  EXPECT_EQ(to_hex(incremental), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, BytesAreHashedVerbatimIncludingNul) {
  const std::string with_nul("a\0b", 3);
  EXPECT_NE(sha256(with_nul), sha256("ab"));
  EXPECT_NE(sha256(with_nul), sha256("a"));
}

TEST(Sha256, MovedHasherKeepsItsState) {
  Sha256 first;
  first.update("ab");
  Sha256 second(std::move(first));
  second.update("c");
  EXPECT_EQ(to_hex(second.finish()), to_hex(sha256("abc")));
}

TEST(Sha256, HexIsLowerCaseAndSixtyFourCharacters) {
  Digest digest{};
  digest[0] = 0xAB;
  digest[31] = 0x0F;
  const std::string hex = to_hex(digest);
  ASSERT_EQ(hex.size(), 64u);
  EXPECT_EQ(hex.substr(0, 2), "ab");
  EXPECT_EQ(hex.substr(62, 2), "0f");
  EXPECT_EQ(hex.substr(2, 60), std::string(60, '0'));
}

TEST(RandomToken, IsThirtyTwoLowerCaseHexCharacters) {
  const std::string token = random_token();
  ASSERT_EQ(token.size(), 32u);
  EXPECT_TRUE(std::all_of(token.begin(), token.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  })) << token;
}

TEST(RandomToken, TokensDoNotRepeat) {
  std::set<std::string> tokens;
  for (int i = 0; i < 1000; ++i) tokens.insert(random_token());
  EXPECT_EQ(tokens.size(), 1000u);
}

// Each thread draws its own batches from the CSPRNG: no two threads hand out the same bytes.
TEST(RandomToken, ThreadsDrawDifferentTokens) {
  std::vector<std::string> first;
  std::vector<std::string> second;
  std::thread a([&] {
    for (int i = 0; i < 200; ++i) first.push_back(random_token());
  });
  std::thread b([&] {
    for (int i = 0; i < 200; ++i) second.push_back(random_token());
  });
  a.join();
  b.join();
  std::set<std::string> tokens(first.begin(), first.end());
  tokens.insert(second.begin(), second.end());
  EXPECT_EQ(tokens.size(), 400u);
}

}  // namespace
}  // namespace idem::crypto
