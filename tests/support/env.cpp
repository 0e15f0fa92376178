#include "support/env.hpp"

#include <cstdlib>
#include <stdexcept>

namespace idem::test {

std::optional<std::string> env_var(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string pg_dsn() {
  auto dsn = env_var("IDEMPROXY_TEST_PG_DSN");
  if (!dsn || dsn->empty())
    throw std::runtime_error(
        "IDEMPROXY_TEST_PG_DSN is not set: these tests need a Postgres server; run them through tests/run.sh, "
        "which starts a private one");
  return *dsn;
}

std::string idemproxy_binary() {
  if (auto path = env_var("IDEMPROXY_BIN"); path && !path->empty()) return *path;
#ifdef IDEMPROXY_BIN
  return IDEMPROXY_BIN;
#else
  throw std::runtime_error("idemproxy was not part of this build (no idemproxy target) and IDEMPROXY_BIN is unset");
#endif
}

std::string test_upstream_binary() {
  if (auto path = env_var("IDEM_TEST_UPSTREAM_BIN"); path && !path->empty()) return *path;
  return IDEM_TEST_UPSTREAM_BIN;
}

}  // namespace idem::test
