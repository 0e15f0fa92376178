#include "http/request_trace.hpp"

#include "crypto/sha256.hpp"

namespace idem::http {

std::string key_hash(std::string_view key) { return crypto::to_hex(crypto::sha256(key)).substr(0, 16); }

}  // namespace idem::http
