#include "crypto/keyring.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace idem::crypto {

bool is_valid_key_id(std::string_view id) {
  return !id.empty() && id.size() <= kMaxKeyIdLength && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

Keyring::Keyring(std::string current_id, std::vector<Entry> keys) : current_id_(std::move(current_id)) {
  for (Entry& entry : keys) {
    if (!is_valid_key_id(entry.id)) throw std::invalid_argument("invalid encryption key id \"" + entry.id + "\"");
    const auto [where, inserted] = keys_.emplace(std::move(entry.id), entry.key);
    OPENSSL_cleanse(entry.key.data(), entry.key.size());
    if (!inserted) throw std::invalid_argument("duplicate encryption key id \"" + where->first + "\"");
  }
  if (keys_.find(current_id_) == keys_.end()) {
    throw std::invalid_argument("current encryption key \"" + current_id_ + "\" is not among the keys");
  }
}

Keyring::~Keyring() {
  for (auto& [id, key] : keys_) OPENSSL_cleanse(key.data(), key.size());
}

const AeadKey& Keyring::current_key() const { return keys_.find(current_id_)->second; }

const AeadKey* Keyring::find(std::string_view id) const {
  const auto found = keys_.find(id);
  return found == keys_.end() ? nullptr : &found->second;
}

}  // namespace idem::crypto
