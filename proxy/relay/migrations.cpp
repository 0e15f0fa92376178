#include "relay/migrations.hpp"

#include "relay/sql.hpp"

namespace idem::relay {

store::pg::MigrationSet relay_migration_set() {
  return store::pg::MigrationSet{.migrations = relay_migrations(),
                                 .create_versions_table = sql::kCreateVersionsTable,
                                 .applied_versions = sql::kAppliedVersions,
                                 .record_version = sql::kRecordVersion,
                                 .lock_key = sql::kMigrationLockKey};
}

}  // namespace idem::relay
