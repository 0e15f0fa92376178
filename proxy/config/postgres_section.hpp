#pragma once
// The Postgres connection both binaries open: idemproxy's `store.postgres`, idemrelay's `postgres`.
#include <chrono>
#include <string>
#include <string_view>

namespace idem::config {

struct PostgresConnectionConfig {
  std::string dsn;
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds query_timeout{2'000};  // deadline on every statement
  bool operator==(const PostgresConnectionConfig&) const = default;
};

namespace detail {
class YamlReader;
class Fields;

// The connection's options among the section's `fields` (whose keys the caller has checked: each
// binary adds its own): dsn (required), connect_timeout, query_timeout. `path` is where the section
// sits ("store.postgres"). Returns false when query_timeout is malformed (reported), for the checks
// that depend on it to stand down.
bool read_postgres_connection(YamlReader& yaml, const Fields& fields, std::string_view path,
                              PostgresConnectionConfig& postgres);
}  // namespace detail

}  // namespace idem::config
