#pragma once
// A throw-away Postgres 15 cluster owned by one test, for tests that stop and restart the server
// (the failure tests under idemproxy, the relay tests under idemrelay): doing that to the suite's
// shared cluster would break every test running beside them. Started
// with deploy/local-env.sh's idem_start_postgres, so it is set up exactly as the shared one.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace idem::test {

enum class CommitMode {
  // synchronous_commit = on: a crash loses nothing that was committed. How a database holding
  // idempotency records must run, and what these tests use unless they say otherwise.
  synchronous,
  // The server default of the suite's shared cluster (synchronous_commit = off): a crash may
  // lose the commits of the last few hundred milliseconds, unless a session asks for more.
  asynchronous,
};

class PrivatePostgres {
 public:
  // initdb + start on a free loopback port. Throws std::runtime_error with the logs on failure.
  explicit PrivatePostgres(CommitMode commit_mode = CommitMode::synchronous);
  // Stops the server (immediate) if it still runs; the data directory goes with the TempDir.
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  const std::string& dsn() const { return dsn_; }
  std::uint16_t port() const { return port_; }

  // `pg_ctl stop -m immediate`: every backend dies at once, as in a crash. Throws on failure.
  void stop_immediate();
  // `pg_ctl start -w` (crash recovery included). Throws on failure.
  void start();
  // The server log's tail: what a failing test prints.
  std::string log_tail(std::size_t bytes = 4096) const;

 private:
  void pg_ctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout) const;

  TempDir dir_;
  std::uint16_t port_ = 0;
  std::string dsn_;
};

}  // namespace idem::test
