#pragma once
// SHA-256 over OpenSSL EVP with an owned context.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace idem::crypto {

using Digest = std::array<std::uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  Sha256(Sha256&&) noexcept = default;
  Sha256& operator=(Sha256&&) noexcept = default;
  ~Sha256();
  void update(std::string_view bytes);
  Digest finish();  // the object must not be updated afterwards

 private:
  struct Free {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> ctx_;
};

Digest sha256(std::string_view bytes);
std::string to_hex(const Digest& digest);  // lower-case, 64 characters
// 16 random bytes from OpenSSL's CSPRNG, hex encoded (32 characters): claim owner tokens. The
// bytes come from a per-thread batch drawn from the CSPRNG (no process forks after start-up).
std::string random_token();

}  // namespace idem::crypto
