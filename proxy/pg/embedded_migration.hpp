#pragma once
// One versioned schema file (<dir>/NNN_name.sql), compiled into the binary by embed_sql.cmake so
// migrating works from any working directory. Each component generates its own list.
#include <string_view>

namespace idem::pg {

struct EmbeddedMigration {
  int version;            // NNN from the file name
  std::string_view name;  // file name, for messages
  std::string_view sql;   // file contents, one or more statements
};

}  // namespace idem::pg
