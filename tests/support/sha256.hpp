#pragma once
// A running SHA-256 (OpenSSL's EVP), hex at the end: what the streaming tests' client and upstream
// check a body by without holding it.
#include <openssl/evp.h>

#include <cstddef>
#include <string>

namespace idem::test {

class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(context_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(context_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t size) { EVP_DigestUpdate(context_, data, size); }
  // The digest of everything updated so far, in lowercase hex; call once.
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(context_, digest, &length);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < length; ++i) {
      out.push_back(kHex[digest[i] >> 4]);
      out.push_back(kHex[digest[i] & 15]);
    }
    return out;
  }

 private:
  EVP_MD_CTX* context_;
};

}  // namespace idem::test
