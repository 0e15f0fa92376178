#pragma once
// idemrelay's versioned schema: config/sql/relay/NNN_name.sql, embedded at build time (the same
// generator as idemproxy's), versions recorded in relay_schema_migrations.
#include <span>

#include "pg/embedded_migration.hpp"
#include "pg/migrate.hpp"

namespace idem::relay {

std::span<const pg::EmbeddedMigration> relay_migrations();  // generated
pg::MigrationSet relay_migration_set();

}  // namespace idem::relay
