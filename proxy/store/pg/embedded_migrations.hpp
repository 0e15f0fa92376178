#pragma once
// The versioned schema files (config/sql/NNN_name.sql), compiled into the binary by
// embed_sql.cmake so migrating works from any working directory.
#include <span>
#include <string_view>

namespace idem::store::pg {

struct EmbeddedMigration {
  int version;            // NNN from the file name
  std::string_view name;  // file name, for messages
  std::string_view sql;   // file contents, one or more statements
};

// Ascending by version, versions unique (checked when the file is generated).
std::span<const EmbeddedMigration> embedded_migrations();

}  // namespace idem::store::pg
