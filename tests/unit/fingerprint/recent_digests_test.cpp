// fingerprint/recent_digests.hpp: a remembered digest is always the digest of the pre-image asked
// about, whether it was remembered, evicted by others, or too large to remember.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crypto/sha256.hpp"
#include "fingerprint/recent_digests.hpp"

namespace idem::fingerprint {
namespace {

std::string computed(const std::string& preimage) { return crypto::to_hex(crypto::sha256(preimage)); }

TEST(RecentDigests, ARepeatedPreimageGetsItsOwnDigestEveryTime) {
  const std::string preimage = "idemproxy-scope-v1" + std::string("2:h+,11:x-tenant-id,5:acme1,");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sha256_hex_remembered(preimage), computed(preimage));
}

// More pre-images than the memo holds, in turns, and pre-images that differ in one byte or are
// prefixes of one another: each answer is its own pre-image's digest.
TEST(RecentDigests, EveryPreimageGetsItsOwnDigestWhateverWasRememberedBefore) {
  std::vector<std::string> preimages;
  for (int i = 0; i < 7; ++i) preimages.push_back("pre-image " + std::to_string(i));
  preimages.push_back("pre-image 1x");
  preimages.push_back("pre-image ");
  preimages.push_back("");
  for (int round = 0; round < 3; ++round) {
    for (const std::string& preimage : preimages) {
      EXPECT_EQ(sha256_hex_remembered(preimage), computed(preimage)) << "\"" << preimage << "\"";
    }
    for (auto it = preimages.rbegin(); it != preimages.rend(); ++it) {
      EXPECT_EQ(sha256_hex_remembered(*it), computed(*it)) << "\"" << *it << "\"";
    }
  }
}

TEST(RecentDigests, ALargePreimageIsHashedEveryTime) {
  const std::string large(64 * 1024, 'b');
  EXPECT_EQ(sha256_hex_remembered(large), computed(large));
  std::string changed = large;
  changed.back() = 'c';
  EXPECT_EQ(sha256_hex_remembered(changed), computed(changed));
}

}  // namespace
}  // namespace idem::fingerprint
