#pragma once
// The record encryption keys of a process: every key that may still decrypt a stored record, by
// id, and the one new records are sealed with. Built once at start-up, then shared read-only by
// every worker (no locking needed).
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "crypto/aead.hpp"

namespace idem::crypto {

// Key ids are stored next to each sealed record and appear in logs: 1-64 of [A-Za-z0-9._-].
inline constexpr std::size_t kMaxKeyIdLength = 64;
bool is_valid_key_id(std::string_view id);

class Keyring {
 public:
  struct Entry {
    std::string id;
    AeadKey key;
  };

  // Throws std::invalid_argument (start-up only) when an id is invalid or repeated, or when
  // `current_id` names none of `keys`.
  Keyring(std::string current_id, std::vector<Entry> keys);
  ~Keyring();  // wipes the key bytes
  Keyring(const Keyring&) = delete;
  Keyring& operator=(const Keyring&) = delete;

  const std::string& current_id() const { return current_id_; }
  const AeadKey& current_key() const;
  // The key named `id`, or nullptr when this keyring does not hold it.
  const AeadKey* find(std::string_view id) const;
  std::size_t size() const { return keys_.size(); }

 private:
  std::string current_id_;
  std::map<std::string, AeadKey, std::less<>> keys_;
};

}  // namespace idem::crypto
