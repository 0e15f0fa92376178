#include "fingerprint/recent_digests.hpp"

#include <array>
#include <cstddef>

#include "crypto/sha256.hpp"

namespace idem::fingerprint {
namespace {

// A request makes up to three small digests (the scope, the host scope, the fingerprint): four
// entries keep a steady client's all, replaced in turn.
class RecentDigests {
 public:
  const std::string* find(std::string_view preimage) const {
    for (const Entry& entry : entries_) {
      if (!entry.hex.empty() && entry.preimage == preimage) return &entry.hex;
    }
    return nullptr;
  }

  void add(std::string_view preimage, const std::string& hex) {
    Entry& entry = entries_[next_];
    next_ = (next_ + 1) % entries_.size();
    entry.preimage.assign(preimage);  // the evicted entry's storage, reused
    entry.hex.assign(hex);
  }

 private:
  struct Entry {
    std::string preimage;
    std::string hex;  // empty: unused
  };
  std::array<Entry, 4> entries_{};
  std::size_t next_ = 0;
};

// Pre-images longer than this are not remembered: a body that large is hashed where it lies,
// and keeping copies of large bodies would cost more memory than the hashing costs time.
constexpr std::size_t kRememberedPreimageMax = 4096;

}  // namespace

std::string sha256_hex_remembered(std::string_view preimage) {
  if (preimage.size() > kRememberedPreimageMax) return crypto::to_hex(crypto::sha256(preimage));
  thread_local RecentDigests recent;
  if (const std::string* hex = recent.find(preimage)) return *hex;
  std::string hex = crypto::to_hex(crypto::sha256(preimage));
  recent.add(preimage, hex);
  return hex;
}

}  // namespace idem::fingerprint
