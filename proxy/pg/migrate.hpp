#pragma once
// Applies a versioned schema (SQL files embedded at build time, see embed_sql.cmake), whichever
// component's it is. Blocking libpq: only for the command line (`idemproxy --migrate`,
// `idemrelay --migrate`) and tests, never on an io thread. Idempotent and safe to run from several
// processes at once (transaction-scoped advisory lock).
#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "pg/embedded_migration.hpp"

namespace idem::pg {

// A versioned schema of one component. Each component records its versions in a table of its
// own, so idemproxy's and idemrelay's migrations can share a database (and a schema).
struct MigrationSet {
  std::span<const EmbeddedMigration> migrations;  // ascending versions
  const char* create_versions_table = nullptr;    // CREATE TABLE IF NOT EXISTS ... (version integer PK)
  const char* applied_versions = nullptr;         // SELECT version (int4) ... ORDER BY version
  const char* record_version = nullptr;           // INSERT ... ($1 = version, int4)
  std::int64_t lock_key = 0;                      // pg_advisory_xact_lock key serializing migrators
};

struct MigrateResult {
  bool ok = false;
  int applied = 0;         // migrations applied by this run
  int schema_version = 0;  // version after the run
  std::string error;       // when !ok: what failed, with the SQLSTATE
};

// `connect_timeout` per host, as pg/blocking_session.hpp counts it.
MigrateResult migrate(const std::string& dsn, const MigrationSet& set,
                      std::chrono::milliseconds connect_timeout = std::chrono::seconds(10));

}  // namespace idem::pg
