#pragma once
// PgBouncer in transaction pooling mode in front of one test's private Postgres cluster, owned by
// that test (the suite's PgBouncer fronts the shared cluster, which a test must not make stall or
// fail). Set up as deploy/local-env.sh's idem_start_pgbouncer sets up the suite's: trust auth,
// synchronous_commit = on for every server session, transaction pooling.
#include <cstdint>
#include <optional>
#include <string>

#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace idem::test {

class PrivatePgBouncer {
 public:
  // Starts pgbouncer on a free loopback port in front of 127.0.0.1:postgres_port (user postgres,
  // any database). Throws std::runtime_error with its log when it does not come up.
  explicit PrivatePgBouncer(std::uint16_t postgres_port);
  // SIGTERM, then SIGKILL; by PID, through the Process that started it.
  ~PrivatePgBouncer();
  PrivatePgBouncer(const PrivatePgBouncer&) = delete;
  PrivatePgBouncer& operator=(const PrivatePgBouncer&) = delete;

  const std::string& dsn() const { return dsn_; }
  std::uint16_t port() const { return port_; }

 private:
  TempDir dir_;
  std::optional<Process> process_;
  std::uint16_t port_ = 0;
  std::string dsn_;
};

}  // namespace idem::test
