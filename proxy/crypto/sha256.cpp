#include "crypto/sha256.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>

namespace idem::crypto {
namespace {

// SHA-256 and the CSPRNG only fail when OpenSSL itself is broken (no default provider, failed
// self-test). No caller could do anything sensible with such an error, and continuing with a
// wrong digest or a predictable token would be worse than stopping.
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "idemproxy: fatal OpenSSL failure in %s: ", what);
  ERR_print_errors_fp(stderr);
  std::fputc('\n', stderr);
  std::abort();
}

constexpr std::array<char, 16> kHexDigits = {'0', '1', '2', '3', '4', '5', '6', '7',
                                             '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};

// Sized once and written by index: push_back per digit was a tenth of a replay's instructions.
std::string hex_encode(const std::uint8_t* bytes, std::size_t size) {
  std::string hex(size * 2, '\0');
  char* out = hex.data();
  for (std::size_t i = 0; i < size; ++i) {
    out[2 * i] = kHexDigits[bytes[i] >> 4];
    out[2 * i + 1] = kHexDigits[bytes[i] & 0x0f];
  }
  return hex;
}

// Fetched once: with OpenSSL 3, EVP_sha256() makes every EVP_DigestInit_ex look the
// implementation up again in the provider store (measured: ~4% of a first request's CPU).
const EVP_MD* sha256_algorithm() {
  static const EVP_MD* const algorithm = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (fetched == nullptr) die("EVP_MD_fetch(SHA256)");
    return fetched;
  }();
  return algorithm;
}

}  // namespace

void Sha256::Free::operator()(evp_md_ctx_st* ctx) const { EVP_MD_CTX_free(ctx); }

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw std::bad_alloc();
  if (EVP_DigestInit_ex(ctx_.get(), sha256_algorithm(), nullptr) != 1) die("EVP_DigestInit_ex(SHA-256)");
}

Sha256::~Sha256() = default;

void Sha256::update(std::string_view bytes) {
  if (bytes.empty()) return;
  if (EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) != 1) die("EVP_DigestUpdate");
}

Digest Sha256::finish() {
  Digest digest{};
  unsigned int written = 0;
  if (EVP_DigestFinal_ex(ctx_.get(), digest.data(), &written) != 1 || written != digest.size()) {
    die("EVP_DigestFinal_ex");
  }
  return digest;
}

Digest sha256(std::string_view bytes) {
  // One context per thread, initialised again for each digest: creating and freeing a context
  // costs more than hashing a key or a fingerprint's pre-image.
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                                     &EVP_MD_CTX_free);
  if (!context) throw std::bad_alloc();
  Digest digest{};
  unsigned int written = 0;
  if (EVP_DigestInit_ex(context.get(), sha256_algorithm(), nullptr) != 1 ||
      EVP_DigestUpdate(context.get(), bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(context.get(), digest.data(), &written) != 1 || written != digest.size()) {
    die("SHA-256");
  }
  return digest;
}

std::string to_hex(const Digest& digest) { return hex_encode(digest.data(), digest.size()); }

std::string random_token() {
  // Drawn from the CSPRNG 64 tokens at a time, per thread: one RAND_bytes call (the DRBG's
  // locking and AES-CTR set-up) cost more than everything else a first request does in this
  // process outside Postgres's driver. Each token's bytes are handed out once and wiped.
  constexpr std::size_t kTokenBytes = 16;
  constexpr std::size_t kBatchBytes = 64 * kTokenBytes;
  thread_local std::array<std::uint8_t, kBatchBytes> batch{};
  thread_local std::size_t used = kBatchBytes;
  if (used == kBatchBytes) {
    if (RAND_bytes(batch.data(), static_cast<int>(batch.size())) != 1) die("RAND_bytes");
    used = 0;
  }
  std::uint8_t* token = batch.data() + used;
  used += kTokenBytes;
  std::string hex = hex_encode(token, kTokenBytes);
  OPENSSL_cleanse(token, kTokenBytes);
  return hex;
}

}  // namespace idem::crypto
