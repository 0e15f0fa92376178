#pragma once
// What the test environment provides: the Postgres DSN set up by tests/run.sh and the paths of the
// binaries under test (compile-time from CMake, overridable through the environment).
#include <optional>
#include <string>
#include <string_view>

namespace idem::test {

std::optional<std::string> env_var(std::string_view name);

// IDEMPROXY_TEST_PG_DSN. Throws std::runtime_error when unset: a test that needs Postgres fails
// (never skips) without it. tests/run.sh sets it up.
std::string pg_dsn();

// Path of the idemproxy binary: $IDEMPROXY_BIN, else the build's target. Throws when neither exists.
std::string idemproxy_binary();

// Path of idem-test-upstream: $IDEM_TEST_UPSTREAM_BIN, else the build's target.
std::string test_upstream_binary();

}  // namespace idem::test
