#pragma once
// Standard Webhooks signatures: webhook-signature: "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>",
// where the key is the base64 part of a "whsec_<base64>" secret. With several secrets (a rotation:
// new and old) the header lists one signature per secret, space-separated, in the secrets' order;
// a consumer accepts the delivery when any of them verifies with a secret it knows.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::relay {

class WebhookSigner {
 public:
  // nullopt when `secrets` is empty or one is not "whsec_" + base64 (crypto::base64_decode) of at
  // least 16 bytes.
  static std::optional<WebhookSigner> from_secrets(const std::vector<std::string>& secrets);
  static std::optional<WebhookSigner> from_secret(std::string_view secret) {
    return from_secrets({std::string(secret)});
  }

  // The header value for one delivery attempt.
  std::string sign(std::string_view message_id, std::int64_t unix_seconds, std::string_view body) const;
  std::size_t secrets() const { return keys_.size(); }

 private:
  explicit WebhookSigner(std::vector<std::string> keys) : keys_(std::move(keys)) {}
  std::vector<std::string> keys_;  // raw bytes
};

}  // namespace idem::relay
