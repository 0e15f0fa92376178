#include "integration/pg_private_schema.hpp"

#include <exception>

#include "store/pg/migrations.hpp"
#include "support/blocking_pg.hpp"
#include "support/random_hex.hpp"

namespace idem::test {
namespace {

// Runs one parameterless command on a fresh connection; empty on success, else the error.
std::string run_command(const std::string& dsn, const std::string& sql) {
  try {
    BlockingPg(dsn).execute(sql);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

PrivateSchema::PrivateSchema(const std::string& dsn, const std::string& prefix) : server_dsn_(dsn) {
  name_ = prefix + "_" + random_hex(16);
  try {
    schema_dsn_ = dsn_with_search_path(dsn, name_);
  } catch (const std::exception& e) {
    error_ = e.what();
    return;
  }
  // The name is ours (prefix + hex), so it needs no quoting beyond the identifier quotes.
  error_ = run_command(dsn, "CREATE SCHEMA \"" + name_ + "\"");
  if (!ok()) return;
  created_ = true;
  const pg::MigrateResult migrated = store::pg::migrate(schema_dsn_);
  if (!migrated.ok) error_ = "migrate: " + migrated.error;
}

PrivateSchema::~PrivateSchema() {
  if (created_) run_command(server_dsn_, "DROP SCHEMA \"" + name_ + "\" CASCADE");  // best effort
}

}  // namespace idem::test
