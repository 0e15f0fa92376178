#include "relay/migrations.hpp"

#include "relay/sql.hpp"

namespace idem::relay {

pg::MigrationSet relay_migration_set() {
  return pg::MigrationSet{.migrations = relay_migrations(),
                          .create_versions_table = sql::kCreateVersionsTable,
                          .applied_versions = sql::kAppliedVersions,
                          .record_version = sql::kRecordVersion,
                          .lock_key = sql::kMigrationLockKey};
}

}  // namespace idem::relay
