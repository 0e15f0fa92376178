#pragma once
// Applies the versioned schema (config/sql/*.sql, embedded at build time). Blocking libpq: only
// for the command line (`idemproxy --migrate`) and tests, never on an io thread. Idempotent and
// safe to run from several processes at once (transaction-scoped advisory lock).
#include <cstdint>
#include <span>
#include <string>

#include "store/pg/embedded_migrations.hpp"

namespace idem::store::pg {

// A versioned schema of one component. Each component records its versions in a table of its
// own, so idemproxy's and idemrelay's migrations can share a database (and a schema).
struct MigrationSet {
  std::span<const EmbeddedMigration> migrations;  // ascending versions
  const char* create_versions_table = nullptr;   // CREATE TABLE IF NOT EXISTS ... (version integer PK)
  const char* applied_versions = nullptr;        // SELECT version (int4) ... ORDER BY version
  const char* record_version = nullptr;          // INSERT ... ($1 = version, int4)
  std::int64_t lock_key = 0;                     // pg_advisory_xact_lock key serializing migrators
};

// idemproxy's schema: config/sql/*.sql, versions in schema_migrations.
MigrationSet proxy_migration_set();

struct MigrateResult {
  bool ok = false;
  int applied = 0;        // migrations applied by this run
  int schema_version = 0; // version after the run
  std::string error;      // when !ok: what failed, with the SQLSTATE
};

MigrateResult migrate(const std::string& dsn, const MigrationSet& set);
// migrate(dsn, proxy_migration_set()).
MigrateResult migrate(const std::string& dsn);

}  // namespace idem::store::pg
