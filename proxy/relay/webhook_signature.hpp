#pragma once
// Standard Webhooks signatures: webhook-signature: "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>",
// where the key is the base64 part of a "whsec_<base64>" secret.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::relay {

class WebhookSigner {
 public:
  // nullopt when `secret` is not "whsec_" + base64 (crypto::base64_decode) of at least 16 bytes.
  static std::optional<WebhookSigner> from_secret(std::string_view secret);

  // The header value for one delivery attempt.
  std::string sign(std::string_view message_id, std::int64_t unix_seconds, std::string_view body) const;

 private:
  explicit WebhookSigner(std::string key) : key_(std::move(key)) {}
  std::string key_;  // raw bytes
};

}  // namespace idem::relay
