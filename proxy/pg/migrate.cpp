#include "pg/migrate.hpp"

#include <libpq-fe.h>

#include <set>
#include <string>
#include <vector>

#include "pg/binary_row.hpp"
#include "pg/blocking_session.hpp"
#include "pg/handles.hpp"
#include "pg/statement.hpp"

namespace idem::pg {
namespace {

// Serializes concurrent migrators of one set (MigrationSet::lock_key) until the transaction ends.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock($1)";

}  // namespace

MigrateResult migrate(const std::string& dsn, const MigrationSet& set, std::chrono::milliseconds connect_timeout) {
  MigrateResult outcome;
  BlockingSession session(dsn, connect_timeout);
  auto failed = [&] {
    outcome.error = session.error();
    return outcome;
  };
  if (!session.ok()) return failed();

  // One transaction: all pending migrations apply, or none. The advisory lock makes concurrent
  // migrators wait, then find the work done. A failure ends the session, which rolls back.
  if (!session.run("begin", "BEGIN")) return failed();
  // As for the pool's connections: a schema reported applied must survive a crash. Set in the
  // transaction, not as a server option: a pooler that refuses the `options` startup parameter
  // still migrates.
  if (!session.run("synchronous_commit", "SET LOCAL synchronous_commit = on")) return failed();
  if (!session.run("lock", kMigrationLock, {Param::int8(set.lock_key)})) return failed();
  if (!session.run("create versions table", set.create_versions_table)) return failed();

  const ResultHandle versions = session.run("read versions table", set.applied_versions);
  if (!versions) return failed();
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
    if (!session.run_script(migration.name, std::string(migration.sql))) return failed();
    if (!session.run("record migration", set.record_version, {Param::int4(migration.version)})) return failed();
    applied.insert(migration.version);
    ++outcome.applied;
  }
  if (!session.run("commit", "COMMIT")) {
    outcome.applied = 0;
    return failed();
  }
  outcome.schema_version = applied.empty() ? 0 : *applied.rbegin();
  outcome.ok = true;
  return outcome;
}

}  // namespace idem::pg
