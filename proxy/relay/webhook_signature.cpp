#include "relay/webhook_signature.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>

namespace idem::relay {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
constexpr std::size_t kMinKeyBytes = 16;

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string out(3 * text.size() / 4, '\0');
  const int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (written < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes: drop one per '='.
  std::size_t length = static_cast<std::size_t>(written);
  if (text.ends_with("==")) {
    length -= 2;
  } else if (text.ends_with('=')) {
    length -= 1;
  }
  out.resize(length);
  return out;
}

std::optional<WebhookSigner> WebhookSigner::from_secret(std::string_view secret) {
  if (!secret.starts_with(kSecretPrefix)) return std::nullopt;
  std::optional<std::string> key = base64_decode(secret.substr(kSecretPrefix.size()));
  if (!key || key->size() < kMinKeyBytes) return std::nullopt;
  return WebhookSigner(std::move(*key));
}

std::string WebhookSigner::sign(std::string_view message_id, std::int64_t unix_seconds, std::string_view body) const {
  std::string content;
  content.reserve(message_id.size() + body.size() + 24);
  content.append(message_id);
  content.push_back('.');
  content.append(std::to_string(unix_seconds));
  content.push_back('.');
  content.append(body);
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_length = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), reinterpret_cast<const unsigned char*>(content.data()),
       content.size(), mac.data(), &mac_length);
  return "v1," + base64_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), mac_length));
}

}  // namespace idem::relay
