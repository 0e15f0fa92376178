#include "store/sealed_record.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/stored_headers.hpp"

namespace idem::store {
namespace {

constexpr std::string_view kAadLabel = "idemproxy-record-v1";
constexpr std::string_view kMarkerPrefix = "v1;kid=";
constexpr std::size_t kLengthBytes = 4;

void append_u32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xFF));
}

std::uint32_t read_u32(std::string_view bytes) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < kLengthBytes; ++i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// Length-prefixed, so ("ab", "c") and ("a", "bc") never frame to the same bytes. Inputs are
// bounded far below 4 GiB (key length, response limits), which seal_response checks.
void append_framed(std::string& out, std::string_view field) {
  append_u32(out, static_cast<std::uint32_t>(field.size()));
  out.append(field);
}

bool fits_u32(std::size_t size) { return size <= std::numeric_limits<std::uint32_t>::max(); }

std::string associated_data(std::string_view scope, std::string_view key, std::string_view key_id, int status) {
  std::string aad(kAadLabel);
  append_framed(aad, scope);
  append_framed(aad, key);
  append_framed(aad, key_id);
  append_u32(aad, static_cast<std::uint32_t>(status));
  return aad;
}

// The key id of a marker value "v1;kid=<id>", or nullopt when it is not one.
std::optional<std::string_view> marker_key_id(std::string_view value) {
  if (!value.starts_with(kMarkerPrefix)) return std::nullopt;
  const std::string_view id = value.substr(kMarkerPrefix.size());
  if (!crypto::is_valid_key_id(id)) return std::nullopt;
  return id;
}

void wipe(std::string& bytes) {
  OPENSSL_cleanse(bytes.data(), bytes.size());
  bytes.clear();
}

Unsealed corrupt(UnsealOutcome outcome, std::string_view key_id, core::StoredResponse& response) {
  response.headers.clear();
  response.body.clear();
  return Unsealed{outcome, std::string(key_id)};
}

}  // namespace

bool is_sealed(const core::StoredResponse& response) {
  return std::any_of(response.headers.begin(), response.headers.end(),
                     [](const auto& field) { return field.first == kSealedMarkerName; });
}

std::optional<core::StoredResponse> seal_response(const crypto::Keyring& keyring, std::string_view scope,
                                                  std::string_view key, const core::StoredResponse& response) {
  std::string header_block = core::encode_header_block(response.headers);
  if (!fits_u32(scope.size()) || !fits_u32(key.size()) || !fits_u32(header_block.size())) return std::nullopt;

  std::string plaintext;
  plaintext.reserve(kLengthBytes + header_block.size() + response.body.size());
  append_framed(plaintext, header_block);
  plaintext.append(response.body);
  wipe(header_block);

  const std::optional<crypto::AeadNonce> nonce = crypto::random_nonce();
  const std::string& key_id = keyring.current_id();
  std::optional<std::string> sealed =
      nonce
          ? crypto::seal(keyring.current_key(), *nonce, associated_data(scope, key, key_id, response.status), plaintext)
          : std::nullopt;
  wipe(plaintext);
  if (!sealed) return std::nullopt;

  core::StoredResponse out;
  out.status = response.status;
  out.headers.emplace_back(std::string(kSealedMarkerName), std::string(kMarkerPrefix) + key_id);
  out.body.reserve(nonce->size() + sealed->size());
  out.body.append(reinterpret_cast<const char*>(nonce->data()), nonce->size());
  out.body.append(*sealed);
  return out;
}

std::string_view unseal_outcome_name(UnsealOutcome outcome) {
  switch (outcome) {
    case UnsealOutcome::plaintext: return "plaintext";
    case UnsealOutcome::opened: return "opened";
    case UnsealOutcome::unknown_key: return "unknown_key";
    case UnsealOutcome::malformed: return "malformed";
    case UnsealOutcome::not_authentic: return "not_authentic";
  }
  return "invalid";
}

Unsealed unseal_response(const crypto::Keyring& keyring, std::string_view scope, std::string_view key,
                         core::StoredResponse& response) {
  if (!is_sealed(response)) return Unsealed{UnsealOutcome::plaintext, {}};
  if (response.headers.size() != 1) return corrupt(UnsealOutcome::malformed, {}, response);
  const std::optional<std::string_view> key_id = marker_key_id(response.headers.front().second);
  if (!key_id) return corrupt(UnsealOutcome::malformed, {}, response);
  const std::string id(*key_id);
  const crypto::AeadKey* aead_key = keyring.find(id);
  if (aead_key == nullptr) return corrupt(UnsealOutcome::unknown_key, id, response);
  if (response.body.size() < crypto::kAeadNonceBytes + crypto::kAeadTagBytes) {
    return corrupt(UnsealOutcome::malformed, id, response);
  }

  crypto::AeadNonce nonce{};
  std::copy_n(reinterpret_cast<const std::uint8_t*>(response.body.data()), nonce.size(), nonce.begin());
  const std::string_view ciphertext = std::string_view(response.body).substr(nonce.size());
  std::optional<std::string> plaintext =
      crypto::open(*aead_key, nonce, associated_data(scope, key, id, response.status), ciphertext);
  if (!plaintext) return corrupt(UnsealOutcome::not_authentic, id, response);

  // Authentic, so written by seal_response: a layout problem now means a bug, still not replayed.
  std::optional<core::HeaderList> headers;
  if (plaintext->size() >= kLengthBytes) {
    const std::size_t block_size = read_u32(*plaintext);
    if (block_size <= plaintext->size() - kLengthBytes) {
      headers = core::decode_header_block(std::string_view(*plaintext).substr(kLengthBytes, block_size));
      if (headers) {
        response.headers = std::move(*headers);
        response.body.assign(*plaintext, kLengthBytes + block_size);
        wipe(*plaintext);
        return Unsealed{UnsealOutcome::opened, id};
      }
    }
  }
  wipe(*plaintext);
  return corrupt(UnsealOutcome::malformed, id, response);
}

std::size_t sealed_body_size(const core::StoredResponse& response) {
  return crypto::kAeadNonceBytes + kLengthBytes + core::encode_header_block(response.headers).size() +
         response.body.size() + crypto::kAeadTagBytes;
}

}  // namespace idem::store
