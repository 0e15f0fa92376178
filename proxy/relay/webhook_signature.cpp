#include "relay/webhook_signature.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>

#include "crypto/base64.hpp"

namespace idem::relay {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
constexpr std::size_t kMinKeyBytes = 16;

}  // namespace

std::optional<WebhookSigner> WebhookSigner::from_secrets(const std::vector<std::string>& secrets) {
  if (secrets.empty()) return std::nullopt;
  std::vector<std::string> keys;
  for (const std::string& secret : secrets) {
    const std::string_view text(secret);
    if (!text.starts_with(kSecretPrefix)) return std::nullopt;
    std::optional<std::string> key = crypto::base64_decode(text.substr(kSecretPrefix.size()));
    if (!key || key->size() < kMinKeyBytes) return std::nullopt;
    keys.push_back(std::move(*key));
  }
  return WebhookSigner(std::move(keys));
}

std::string WebhookSigner::sign(std::string_view message_id, std::int64_t unix_seconds, std::string_view body) const {
  std::string content;
  content.reserve(message_id.size() + body.size() + 24);
  content.append(message_id);
  content.push_back('.');
  content.append(std::to_string(unix_seconds));
  content.push_back('.');
  content.append(body);
  std::string header;
  for (const std::string& key : keys_) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
    unsigned int mac_length = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(content.data()),
         content.size(), mac.data(), &mac_length);
    if (!header.empty()) header.push_back(' ');
    header += "v1," + crypto::base64_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), mac_length));
  }
  return header;
}

}  // namespace idem::relay
