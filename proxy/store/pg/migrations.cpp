#include "store/pg/migrations.hpp"

#include "store/pg/sql.hpp"

namespace idem::store::pg {

idem::pg::MigrationSet proxy_migration_set() {
  return idem::pg::MigrationSet{.migrations = embedded_migrations(),
                                .create_versions_table = sql::kCreateSchemaMigrations,
                                .applied_versions = sql::kAppliedVersions,
                                .record_version = sql::kRecordMigration,
                                .lock_key = sql::kMigrationLockKey};
}

idem::pg::MigrateResult migrate(const std::string& dsn) { return idem::pg::migrate(dsn, proxy_migration_set()); }

}  // namespace idem::store::pg
