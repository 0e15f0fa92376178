#pragma once
// How a finished record is laid out in Redis (the shared replay cache): its key and its value.
//
// Key: key_prefix followed by the lower-case hex SHA-256 of u32be(len) || scope || u32be(len) ||
// key. Raw idempotency keys and scopes (which may carry tenant ids) never appear in Redis.
//
// Value, version 1 (integers big-endian, lengths u32):
//   "IDRC" (magic) | u8 version = 1 | u8 state (1 completed, 2 too_large) | u16 status |
//   i64 expires_at (Unix epoch milliseconds, the writer's clock) |
//   len || fingerprint | len || header block (core::encode_header_block) | len || body
// and nothing after. A too_large record has neither headers nor body.
//
// With encryption at rest on, a completed response is sealed exactly as its Postgres copy is
// (store/sealed_record.hpp: AES-256-GCM with the keyring's current key; scope, key, key id and
// status in the associated data): the header block then holds only the seal marker and the body
// only the ciphertext, so Redis never holds a readable response, and a value moved to another
// key does not open. The fingerprint, state, status and expiry stay in clear, as in Postgres.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/record.hpp"
#include "crypto/keyring.hpp"

namespace idem::cache {

struct RedisRecord {
  core::RecordState state = core::RecordState::completed;  // completed or too_large
  std::string fingerprint;
  core::StoredResponse response;
  std::int64_t expires_at_unix_ms = 0;
};

std::string redis_record_key(std::string_view key_prefix, std::string_view scope, std::string_view key);

// The value layout alone (no sealing). decode: nullopt for anything but one whole, well-formed
// version-1 value (wrong magic or version, truncated, trailing bytes, unknown state, a status
// outside 100-599, a header block that does not parse, headers or body on a too_large record).
std::string encode_redis_record(const RedisRecord& record);
std::optional<RedisRecord> decode_redis_record(std::string_view value);

// Why a value was refused.
enum class RedisValueProblem {
  none,
  malformed,      // decode_redis_record refused it
  not_sealed,     // encryption at rest is on, and a completed response came in clear
  cannot_open,    // sealed, but the seal does not open (unknown key id, altered bytes, another key)
  sealed_no_key,  // sealed, and encryption at rest is off here: nothing to open it with
};
std::string_view redis_value_problem_name(RedisValueProblem problem);

// The layout plus encryption at rest, for one process's keyring.
class RedisRecordCodec {
 public:
  // `keyring` null: encryption at rest is off; values are written in clear.
  explicit RedisRecordCodec(std::shared_ptr<const crypto::Keyring> keyring);

  // The value for (scope, key); nullopt only when sealing fails (OpenSSL failure).
  std::optional<std::string> seal(std::string_view scope, std::string_view key, const RedisRecord& record) const;

  struct Opened {
    RedisValueProblem problem = RedisValueProblem::none;
    std::string detail;  // for logs: the unseal outcome and key id; never content
    RedisRecord record;  // meaningful when problem == none: the response in clear
  };
  Opened open(std::string_view scope, std::string_view key, std::string_view value) const;

 private:
  std::shared_ptr<const crypto::Keyring> keyring_;
};

}  // namespace idem::cache
