#pragma once
// Applies the versioned schema (config/sql/*.sql, embedded at build time). Blocking libpq: only
// for the command line (`idemproxy --migrate`) and tests, never on an io thread. Idempotent and
// safe to run from several processes at once (transaction-scoped advisory lock).
#include <string>

namespace idem::store::pg {

struct MigrateResult {
  bool ok = false;
  int applied = 0;        // migrations applied by this run
  int schema_version = 0; // version after the run
  std::string error;      // when !ok: what failed, with the SQLSTATE
};

MigrateResult migrate(const std::string& dsn);

}  // namespace idem::store::pg
