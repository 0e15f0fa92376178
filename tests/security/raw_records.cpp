#include "security/raw_records.hpp"

#include <libpq-fe.h>

#include <stdexcept>

#include "pg/handles.hpp"
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

using PgConn = pg::ConnHandle;
using PgResult = pg::ResultHandle;

PgConn connect_test_database() {
  PgConn connection(PQconnectdb(pg_dsn().c_str()));
  if (PQstatus(connection.get()) != CONNECTION_OK) {
    throw std::runtime_error(std::string("cannot connect to the test database: ") + PQerrorMessage(connection.get()));
  }
  return connection;
}

// Runs statement with one text parameter; results in binary format, so bytea and text columns
// arrive as the raw bytes stored.
PgResult exec_with_key(PGconn* connection, const char* statement, const std::string& key) {
  const char* values[] = {key.c_str()};
  PgResult result(PQexecParams(connection, statement, 1, nullptr, values, nullptr, nullptr, 1));
  const auto status = PQresultStatus(result.get());
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    throw std::runtime_error(std::string(statement) + ": " + PQerrorMessage(connection));
  }
  return result;
}

std::string value_at(const PGresult* result, int row, int column) {
  return std::string(PQgetvalue(result, row, column), static_cast<std::size_t>(PQgetlength(result, row, column)));
}

}  // namespace

std::optional<std::string> raw_stored_body(const std::string& key) {
  const auto connection = connect_test_database();
  const auto result = exec_with_key(connection.get(), kSelectBody, key);
  if (PQntuples(result.get()) != 1 || PQgetisnull(result.get(), 0, 0)) return std::nullopt;
  return value_at(result.get(), 0, 0);
}

std::string raw_record_bytes(const std::string& key) {
  const auto connection = connect_test_database();
  const auto result = exec_with_key(connection.get(), kSelectRecords, key);
  std::string bytes;
  for (int row = 0; row < PQntuples(result.get()); ++row) {
    for (int column = 0; column < PQnfields(result.get()); ++column) {
      bytes += value_at(result.get(), row, column);
      bytes += '\n';
    }
  }
  return bytes;
}

int flip_stored_body_byte(const std::string& key) {
  const auto connection = connect_test_database();
  const auto result = exec_with_key(connection.get(), kFlipBodyByte, key);
  return std::stoi(PQcmdTuples(result.get()));
}

}  // namespace idem::test::security
