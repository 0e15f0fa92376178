#include "cache/redis_record.hpp"

#include <utility>

#include "core/stored_headers.hpp"
#include "crypto/sha256.hpp"
#include "store/sealed_record.hpp"

namespace idem::cache {
namespace {

constexpr std::string_view kMagic = "IDRC";
constexpr std::uint8_t kVersion = 1;
constexpr std::uint8_t kStateCompleted = 1;
constexpr std::uint8_t kStateTooLarge = 2;
constexpr int kMinStatus = 100;
constexpr int kMaxStatus = 599;

void append_uint(std::string& out, std::uint64_t value, int bytes) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xFF));
}

void append_framed(std::string& out, std::string_view field) {
  append_uint(out, field.size(), 4);
  out.append(field);
}

// Reads the value front to back; any read past the end leaves it failed for good.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}

  std::uint64_t uint(int bytes) {
    if (failed_ || rest_.size() < static_cast<std::size_t>(bytes)) return fail();
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i)
      value = (value << 8) | static_cast<unsigned char>(rest_[static_cast<std::size_t>(i)]);
    rest_.remove_prefix(static_cast<std::size_t>(bytes));
    return value;
  }
  std::string_view bytes(std::size_t count) {
    if (failed_ || rest_.size() < count) {
      fail();
      return {};
    }
    const std::string_view out = rest_.substr(0, count);
    rest_.remove_prefix(count);
    return out;
  }
  std::string_view framed() { return bytes(static_cast<std::size_t>(uint(4))); }
  bool whole() const { return !failed_ && rest_.empty(); }

 private:
  std::uint64_t fail() {
    failed_ = true;
    rest_ = {};
    return 0;
  }
  std::string_view rest_;
  bool failed_ = false;
};

}  // namespace

std::string redis_record_key(std::string_view key_prefix, std::string_view scope, std::string_view key) {
  std::string framed;
  framed.reserve(8 + scope.size() + key.size());
  append_framed(framed, scope);
  append_framed(framed, key);
  std::string out(key_prefix);
  out += crypto::to_hex(crypto::sha256(framed));
  return out;
}

std::string encode_redis_record(const RedisRecord& record) {
  const std::string header_block = core::encode_header_block(record.response.headers);
  std::string out;
  out.reserve(kMagic.size() + 16 + 12 + record.fingerprint.size() + header_block.size() + record.response.body.size());
  out.append(kMagic);
  append_uint(out, kVersion, 1);
  append_uint(out, record.state == core::RecordState::too_large ? kStateTooLarge : kStateCompleted, 1);
  append_uint(out, static_cast<std::uint16_t>(record.response.status), 2);
  append_uint(out, static_cast<std::uint64_t>(record.expires_at_unix_ms), 8);
  append_framed(out, record.fingerprint);
  append_framed(out, header_block);
  append_framed(out, record.response.body);
  return out;
}

std::optional<RedisRecord> decode_redis_record(std::string_view value) {
  Reader reader(value);
  if (reader.bytes(kMagic.size()) != kMagic || reader.uint(1) != kVersion) return std::nullopt;
  RedisRecord record;
  switch (reader.uint(1)) {
    case kStateCompleted: record.state = core::RecordState::completed; break;
    case kStateTooLarge: record.state = core::RecordState::too_large; break;
    default: return std::nullopt;
  }
  record.response.status = static_cast<int>(reader.uint(2));
  record.expires_at_unix_ms = static_cast<std::int64_t>(reader.uint(8));
  record.fingerprint = std::string(reader.framed());
  const std::string_view header_block = reader.framed();
  const std::string_view body = reader.framed();
  if (!reader.whole()) return std::nullopt;
  if (record.response.status < kMinStatus || record.response.status > kMaxStatus) return std::nullopt;
  if (record.fingerprint.empty()) return std::nullopt;
  if (record.state == core::RecordState::too_large && (!header_block.empty() || !body.empty())) return std::nullopt;
  std::optional<core::HeaderList> headers = core::decode_header_block(header_block);
  if (!headers) return std::nullopt;
  record.response.headers = std::move(*headers);
  record.response.body = std::string(body);
  return record;
}

std::string_view redis_value_problem_name(RedisValueProblem problem) {
  switch (problem) {
    case RedisValueProblem::none: return "none";
    case RedisValueProblem::malformed: return "malformed";
    case RedisValueProblem::not_sealed: return "not_sealed";
    case RedisValueProblem::cannot_open: return "cannot_open";
    case RedisValueProblem::sealed_no_key: return "sealed_no_key";
  }
  return "invalid";
}

RedisRecordCodec::RedisRecordCodec(std::shared_ptr<const crypto::Keyring> keyring) : keyring_(std::move(keyring)) {}

std::optional<std::string> RedisRecordCodec::seal(std::string_view scope, std::string_view key,
                                                  const RedisRecord& record) const {
  // A too_large record has no headers or body: nothing to hide (the same as in Postgres).
  if (!keyring_ || record.state != core::RecordState::completed) return encode_redis_record(record);
  std::optional<core::StoredResponse> sealed = store::seal_response(*keyring_, scope, key, record.response);
  if (!sealed) return std::nullopt;
  RedisRecord out;
  out.state = record.state;
  out.fingerprint = record.fingerprint;
  out.response = std::move(*sealed);
  out.expires_at_unix_ms = record.expires_at_unix_ms;
  return encode_redis_record(out);
}

RedisRecordCodec::Opened RedisRecordCodec::open(std::string_view scope, std::string_view key,
                                                std::string_view value) const {
  Opened opened;
  std::optional<RedisRecord> decoded = decode_redis_record(value);
  if (!decoded) {
    opened.problem = RedisValueProblem::malformed;
    return opened;
  }
  opened.record = std::move(*decoded);
  core::StoredResponse& response = opened.record.response;
  const bool sealed = store::is_sealed(response);
  if (!keyring_) {
    if (sealed) opened.problem = RedisValueProblem::sealed_no_key;
    return opened;
  }
  if (!sealed) {
    // With encryption at rest on, every completed value this process accepts was sealed: a value
    // in clear was written by a proxy without the keys, or by someone else.
    if (opened.record.state == core::RecordState::completed) opened.problem = RedisValueProblem::not_sealed;
    return opened;
  }
  const store::Unsealed unsealed = store::unseal_response(*keyring_, scope, key, response);
  if (unsealed.outcome != store::UnsealOutcome::opened) {
    opened.problem = RedisValueProblem::cannot_open;
    opened.detail = std::string(store::unseal_outcome_name(unsealed.outcome));
    if (!unsealed.key_id.empty()) opened.detail += " (key id " + unsealed.key_id + ")";
  }
  return opened;
}

}  // namespace idem::cache
