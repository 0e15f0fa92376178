#include "crypto/aead.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <memory>

namespace idem::crypto {
namespace {

struct CipherContextFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, CipherContextFree>;

// EVP lengths are ints: longer inputs go through in slices.
constexpr std::size_t kMaxSlice = static_cast<std::size_t>(INT_MAX) & ~std::size_t{15};

const unsigned char* bytes_of(std::string_view text) { return reinterpret_cast<const unsigned char*>(text.data()); }
unsigned char* bytes_of(std::string& text) { return reinterpret_cast<unsigned char*>(text.data()); }

// A context set up for AES-256-GCM with a 12-byte IV (GCM's default IV length), or null.
CipherContext start(const AeadKey& key, const AeadNonce& nonce, bool encrypt) {
  CipherContext ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return nullptr;
  const int enc = encrypt ? 1 : 0;
  if (EVP_CipherInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr, enc) != 1) return nullptr;
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce.size()), nullptr) != 1) {
    return nullptr;
  }
  if (EVP_CipherInit_ex(ctx.get(), nullptr, nullptr, key.data(), nonce.data(), enc) != 1) return nullptr;
  return ctx;
}

// Feeds the associated data (no output).
bool add_aad(EVP_CIPHER_CTX* ctx, std::string_view aad) {
  while (!aad.empty()) {
    const std::size_t slice = std::min(aad.size(), kMaxSlice);
    int ignored = 0;
    if (EVP_CipherUpdate(ctx, nullptr, &ignored, bytes_of(aad), static_cast<int>(slice)) != 1) return false;
    aad.remove_prefix(slice);
  }
  return true;
}

// Runs `input` through the cipher into `out` (GCM is a stream mode: output length = input length).
bool transform(EVP_CIPHER_CTX* ctx, std::string_view input, unsigned char* out) {
  while (!input.empty()) {
    const std::size_t slice = std::min(input.size(), kMaxSlice);
    int written = 0;
    if (EVP_CipherUpdate(ctx, out, &written, bytes_of(input), static_cast<int>(slice)) != 1 ||
        written != static_cast<int>(slice)) {
      return false;
    }
    out += slice;
    input.remove_prefix(slice);
  }
  return true;
}

}  // namespace

std::optional<AeadNonce> random_nonce() {
  AeadNonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) return std::nullopt;
  return nonce;
}

std::optional<std::string> seal(const AeadKey& key, const AeadNonce& nonce, std::string_view aad,
                                std::string_view plaintext) {
  const CipherContext ctx = start(key, nonce, true);
  if (!ctx || !add_aad(ctx.get(), aad)) return std::nullopt;
  std::string out(plaintext.size() + kAeadTagBytes, '\0');
  if (!transform(ctx.get(), plaintext, bytes_of(out))) return std::nullopt;
  int final_bytes = 0;
  if (EVP_CipherFinal_ex(ctx.get(), bytes_of(out) + plaintext.size(), &final_bytes) != 1 || final_bytes != 0) {
    return std::nullopt;
  }
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kAeadTagBytes),
                          bytes_of(out) + plaintext.size()) != 1) {
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> open(const AeadKey& key, const AeadNonce& nonce, std::string_view aad,
                                std::string_view ciphertext_and_tag) {
  if (ciphertext_and_tag.size() < kAeadTagBytes) return std::nullopt;
  const std::string_view ciphertext = ciphertext_and_tag.substr(0, ciphertext_and_tag.size() - kAeadTagBytes);
  std::array<unsigned char, kAeadTagBytes> tag{};
  std::copy_n(bytes_of(ciphertext_and_tag.substr(ciphertext.size())), tag.size(), tag.begin());

  const CipherContext ctx = start(key, nonce, false);
  if (!ctx || !add_aad(ctx.get(), aad)) return std::nullopt;
  std::string plaintext(ciphertext.size(), '\0');
  if (!transform(ctx.get(), ciphertext, bytes_of(plaintext)) ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag.size()), tag.data()) != 1) {
    OPENSSL_cleanse(plaintext.data(), plaintext.size());
    return std::nullopt;
  }
  int final_bytes = 0;
  if (EVP_CipherFinal_ex(ctx.get(), bytes_of(plaintext) + plaintext.size(), &final_bytes) != 1) {
    // Authentication failed: the decrypted bytes are not to be trusted, nor left lying around.
    OPENSSL_cleanse(plaintext.data(), plaintext.size());
    return std::nullopt;
  }
  return plaintext;
}

}  // namespace idem::crypto
