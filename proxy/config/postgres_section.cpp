#include "config/postgres_section.hpp"

#include <optional>
#include <string>
#include <utility>

#include "config/yaml_reader.hpp"

namespace idem::config::detail {

bool read_postgres_connection(YamlReader& yaml, const Fields& fields, std::string_view path,
                              PostgresConnectionConfig& postgres) {
  const std::string dsn_path = join_path(path, "dsn");
  if (auto dsn = yaml.required_string(fields, "dsn", dsn_path,
                                      dsn_path + " is required (e.g. dsn: \"${IDEMPROXY_PG_DSN}\")")) {
    postgres.dsn = std::move(*dsn);
  }
  if (const Field* f = fields.find("connect_timeout")) {
    assign(yaml.duration(*f, join_path(path, "connect_timeout"), false), postgres.connect_timeout);
  }
  const Field* query = fields.find("query_timeout");
  if (query == nullptr) return true;
  const auto timeout = yaml.duration(*query, join_path(path, "query_timeout"), false);
  assign(timeout, postgres.query_timeout);
  return timeout.has_value();
}

}  // namespace idem::config::detail
