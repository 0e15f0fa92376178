#include "pg/migrate.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pg/binary_row.hpp"
#include "pg/handles.hpp"
#include "pg/statement.hpp"

namespace idem::pg {
namespace {

// Serializes concurrent migrators of one set (MigrationSet::lock_key) until the transaction ends.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock($1)";

// "relation ... already exists, skipping" and the like: not worth a line on a migration run.
void ignore_notice(void* /*arg*/, const char* /*message*/) {}

std::string describe_failure(std::string_view step, const PGconn* connection, const PGresult* result) {
  std::string message = std::string(step) + ": ";
  const char* text = result != nullptr ? PQresultErrorMessage(result) : nullptr;
  message += (text != nullptr && *text != '\0') ? text : PQerrorMessage(connection);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const char* code = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (code != nullptr) message += std::string(" (SQLSTATE ") + code + ")";
  return message;
}

ResultHandle checked(ResultHandle result, std::string_view step, PGconn* connection, std::string& error) {
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    error = describe_failure(step, connection, result.get());
    return nullptr;
  }
  return result;
}

// Runs one statement (binary parameters and results); on failure fills `error` and returns null.
ResultHandle run_step(PGconn* connection, std::string_view step, const char* sql, const std::vector<Param>& params,
                      std::string& error) {
  std::vector<Oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Param& param : params) {
    types.push_back(param.type());
    values.push_back(param.is_null() ? nullptr : param.bytes().data());
    lengths.push_back(static_cast<int>(param.bytes().size()));
    formats.push_back(1);
  }
  ResultHandle result(PQexecParams(connection, sql, static_cast<int>(params.size()), types.data(), values.data(),
                                   lengths.data(), formats.data(), /*resultFormat=*/1));
  return checked(std::move(result), step, connection, error);
}

// Runs a migration file: the simple protocol, since a file may hold several statements.
ResultHandle run_script(PGconn* connection, std::string_view step, const std::string& script, std::string& error) {
  return checked(ResultHandle(PQexec(connection, script.c_str())), step, connection, error);
}

}  // namespace

MigrateResult migrate(const std::string& dsn, const MigrationSet& set) {
  MigrateResult outcome;
  ConnHandle connection(PQconnectdb(dsn.c_str()));
  if (!connection || PQstatus(connection.get()) != CONNECTION_OK) {
    outcome.error = describe_failure("connect", connection.get(), nullptr);
    return outcome;
  }
  PQsetNoticeProcessor(connection.get(), ignore_notice, nullptr);
  PGconn* const conn = connection.get();

  // One transaction: all pending migrations apply, or none. The advisory lock makes concurrent
  // migrators wait, then find the work done. A failure ends the session, which rolls back.
  if (!run_step(conn, "begin", "BEGIN", {}, outcome.error)) return outcome;
  // As for the pool's connections: a schema reported applied must survive a crash. Set in
  // the transaction, not through the connection's `options`, which would replace the DSN's own
  // (e.g. its -c search_path=...).
  if (!run_step(conn, "synchronous_commit", "SET LOCAL synchronous_commit = on", {}, outcome.error)) return outcome;
  if (!run_step(conn, "lock", kMigrationLock, {Param::int8(set.lock_key)}, outcome.error)) {
    return outcome;
  }
  if (!run_step(conn, "create versions table", set.create_versions_table, {}, outcome.error)) return outcome;

  const ResultHandle versions = run_step(conn, "read versions table", set.applied_versions, {}, outcome.error);
  if (!versions) return outcome;
  std::set<int> applied;
  for (int row = 0; row < PQntuples(versions.get()); ++row) {
    const auto version = BinaryRow(versions.get(), row).int4(0);
    if (!version) {
      outcome.error = "read versions table: unexpected version column";
      return outcome;
    }
    applied.insert(*version);
  }

  for (const EmbeddedMigration& migration : set.migrations) {
    if (applied.contains(migration.version)) continue;
    if (!run_script(conn, migration.name, std::string(migration.sql), outcome.error)) return outcome;
    if (!run_step(conn, "record migration", set.record_version, {Param::int4(migration.version)}, outcome.error)) {
      return outcome;
    }
    applied.insert(migration.version);
    ++outcome.applied;
  }
  if (!run_step(conn, "commit", "COMMIT", {}, outcome.error)) {
    outcome.applied = 0;
    return outcome;
  }
  outcome.schema_version = applied.empty() ? 0 : *applied.rbegin();
  outcome.ok = true;
  return outcome;
}

}  // namespace idem::pg
