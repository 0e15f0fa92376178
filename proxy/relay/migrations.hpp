#pragma once
// idemrelay's versioned schema: config/sql/relay/NNN_name.sql, embedded at build time (the same
// generator as idemproxy's), versions recorded in relay_schema_migrations.
#include <span>

#include "store/pg/embedded_migrations.hpp"
#include "store/pg/migrate.hpp"

namespace idem::relay {

std::span<const store::pg::EmbeddedMigration> relay_migrations();  // generated
store::pg::MigrationSet relay_migration_set();

}  // namespace idem::relay
