#pragma once
// idemproxy's versioned schema: config/sql/NNN_name.sql, embedded at build time
// (pg/embed_sql.cmake), versions recorded in schema_migrations.
#include <span>
#include <string>

#include "pg/embedded_migration.hpp"
#include "pg/migrate.hpp"

namespace idem::store::pg {

// Ascending by version, versions unique (checked when the file is generated).
std::span<const idem::pg::EmbeddedMigration> embedded_migrations();  // generated
idem::pg::MigrationSet proxy_migration_set();
// idem::pg::migrate(dsn, proxy_migration_set()).
idem::pg::MigrateResult migrate(const std::string& dsn);

}  // namespace idem::store::pg
