#include "integration/pg_private_schema.hpp"

#include <libpq-fe.h>

#include <cstdint>
#include <random>
#include <string_view>

#include "pg/handles.hpp"
#include "store/pg/migrations.hpp"

namespace idem::test {
namespace {

// `dsn` with `-c search_path=<schema>` added to its `options` (kept, when it has some).
std::string with_search_path(const std::string& dsn, const std::string& schema, std::string& error) {
  char* parse_error = nullptr;
  const pg::ConninfoHandle options(PQconninfoParse(dsn.c_str(), &parse_error));
  if (!options) {
    error = parse_error != nullptr ? parse_error : "cannot parse the DSN";
    PQfreemem(parse_error);
    return {};
  }
  const auto quoted = [](const std::string& text) {
    std::string out = "'";
    for (const char c : text) {
      if (c == '\'' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    return out + "'";
  };
  std::string result;
  std::string server_options;
  for (const PQconninfoOption* option = options.get(); option->keyword != nullptr; ++option) {
    if (option->val == nullptr) continue;
    if (std::string_view(option->keyword) == "options") {
      server_options = option->val;
      continue;
    }
    result += std::string(option->keyword) + "=" + quoted(option->val) + " ";
  }
  if (!server_options.empty()) server_options += " ";
  return result + "options=" + quoted(server_options + "-c search_path=" + schema);
}

// Runs one parameterless command on a fresh connection; empty on success, else the error.
std::string run_command(const std::string& dsn, const std::string& sql) {
  const pg::ConnHandle connection(PQconnectdb(dsn.c_str()));
  if (!connection || PQstatus(connection.get()) != CONNECTION_OK) {
    return "connect: " + std::string(connection ? PQerrorMessage(connection.get()) : "out of memory");
  }
  // DROP ... CASCADE lists what it drops as NOTICEs: not worth a test log.
  PQsetNoticeProcessor(connection.get(), [](void*, const char*) {}, nullptr);
  const pg::ResultHandle result(PQexec(connection.get(), sql.c_str()));
  if (!result || PQresultStatus(result.get()) != PGRES_COMMAND_OK) return sql + ": " + PQerrorMessage(connection.get());
  return {};
}

}  // namespace

PrivateSchema::PrivateSchema(const std::string& dsn, const std::string& prefix) : server_dsn_(dsn) {
  static std::mt19937_64 random(std::random_device{}());
  static const char* const digits = "0123456789abcdef";
  name_ = prefix + "_";
  for (std::uint64_t bits = random(), i = 0; i < 16; ++i, bits >>= 4) name_.push_back(digits[bits & 0xF]);

  schema_dsn_ = with_search_path(dsn, name_, error_);
  if (!ok()) return;
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
