#include "security/raw_records.hpp"

#include "support/blocking_pg.hpp"
#include "support/env.hpp"

namespace idem::test::security {
namespace {

constexpr const char* kSelectBody = "SELECT response_body FROM idempotency_records WHERE key = $1";
constexpr const char* kSelectRecords =
    "SELECT scope, key, fingerprint, state, owner, response_headers, response_body "
    "FROM idempotency_records WHERE key = $1";
// XOR rather than overwrite: the byte changes whatever it held.
constexpr const char* kFlipBodyByte =
    "UPDATE idempotency_records SET response_body = set_byte(response_body, 20, get_byte(response_body, 20) # 255) "
    "WHERE key = $1";

// Results in binary format, so bytea and text columns arrive as the raw bytes stored.
std::vector<PgRow> raw_rows(const char* statement, const std::string& key) {
  return BlockingPg(pg_dsn()).query(statement, {key}, PgFormat::binary);
}

}  // namespace

std::optional<std::string> raw_stored_body(const std::string& key) {
  const std::vector<PgRow> rows = raw_rows(kSelectBody, key);
  if (rows.size() != 1) return std::nullopt;
  return rows[0][0];
}

std::string raw_record_bytes(const std::string& key) {
  std::string bytes;
  for (const PgRow& row : raw_rows(kSelectRecords, key)) {
    for (const std::optional<std::string>& value : row) {
      bytes += value.value_or("");
      bytes += '\n';
    }
  }
  return bytes;
}

int flip_stored_body_byte(const std::string& key) {
  return static_cast<int>(BlockingPg(pg_dsn()).execute(kFlipBodyByte, {key}));
}

}  // namespace idem::test::security
