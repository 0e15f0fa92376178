#pragma once
// One idemproxy process (restartable on the same port and config, so a test can kill -9 it and
// bring it back), the idem-test-upstream behind it, and the operator commands (--inspect,
// --release) run against its configuration, all through support/proxy_launcher. Unlike
// support/proxy_fixture.hpp, the proxy's lifecycle is the test's to drive; the upstream's counters
// survive every proxy restart.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/process.hpp"
#include "support/proxy_launcher.hpp"
#include "support/temp_dir.hpp"
#include "support/upstream_process.hpp"

namespace idem::test::failure {

// The config every failure test starts from. Routes (no scope headers, so --inspect needs none):
//   POST /lock   unknown_outcome: lock,  store_unavailable: fail_closed (the defaults)
//   POST /retry  unknown_outcome: retry
//   POST /open   store_unavailable: fail_open
//   POST /wait   in_flight: wait
//   POST /wait-retry   in_flight: wait, unknown_outcome: retry
// The replay cache is off (every retry asks Postgres), the reaper does not run, and there is no
// admin listener unless ADMIN_LISTEN names one (its fixed default port would collide between tests
// running side by side).
// Placeholders with defaults (RigOptions::variables overrides them): UPSTREAM_TIMEOUT 1s,
// LEASE 5s, DRAIN_TIMEOUT 10s, WAIT_TIMEOUT 5s, WORKERS 2, POOL_SIZE 4, PG_CONNECT_TIMEOUT 1s,
// PG_QUERY_TIMEOUT 1s, PG_ACQUIRE_TIMEOUT 500ms, UPSTREAM_MAX_CONNECTIONS 64, MAX_WAITING 1024,
// TTL 1h, REAPER_INTERVAL 0s (off), STORE_REDIS "" (no Redis replay cache; else a `  redis: {...}` line
// under store), ADMIN_LISTEN off (else 127.0.0.1:PORT). Set by the rig: PROXY_PORT, UPSTREAM_PORT, PG_DSN.
// The upstream's connect_timeout is 500ms, so with the default store timeouts the timing model's
// shortest lease (README "Timing") is UPSTREAM_TIMEOUT + 4s: 2 × PG_QUERY_TIMEOUT 1s +
// PG_ACQUIRE_TIMEOUT 500ms + connect_timeout 500ms + UPSTREAM_TIMEOUT + margin 1s. A test that sets
// UPSTREAM_TIMEOUT or the store timeouts sets a LEASE that follows the same sum.
std::string_view failure_config_template();

struct RigOptions {
  std::map<std::string, std::string> variables;
  // Postgres the proxy uses; empty: the suite's shared database (IDEMPROXY_TEST_PG_DSN).
  std::string pg_dsn;
  // false: the config points at a port nothing listens on until start_upstream().
  bool start_upstream = true;
  // Given the upstream's port, the port the proxy is told to use instead (e.g. a FaultProxy's in
  // front of it); unset: the upstream's own.
  std::function<std::uint16_t(std::uint16_t upstream_port)> route_upstream;
};

inline RigOptions rig_options(std::map<std::string, std::string> variables, std::string pg_dsn = {},
                              bool start_upstream = true) {
  RigOptions options;
  options.variables = std::move(variables);
  options.pg_dsn = std::move(pg_dsn);
  options.start_upstream = start_upstream;
  return options;
}

// What `idemproxy --inspect` said about one record.
struct RecordInspection {
  std::optional<int> exit_status;  // 0 found, 3 absent, nullopt timed out
  std::string state;               // "in_flight", "completed", "too_large", "unknown"; empty if absent
  std::int64_t lease_expires_at_ms = 0;
  std::int64_t created_at_ms = 0;
  std::int64_t expires_at_ms = 0;
  std::string output;  // stdout + stderr, for assertion messages
};

class ProxyRig {
 public:
  explicit ProxyRig(RigOptions options = {});
  ~ProxyRig();
  ProxyRig(const ProxyRig&) = delete;
  ProxyRig& operator=(const ProxyRig&) = delete;

  // Starts the upstream (unless disabled), writes the config, migrates and starts the proxy.
  // Throws std::runtime_error with the logs when something does not come up.
  void start();
  // A new proxy process with the same config and port; waits until it accepts connections.
  void start_proxy();
  // SIGKILL to the running proxy, reaped.
  void kill_proxy();
  // Sends signo to the running proxy.
  void signal_proxy(int signo);
  // The running (or last) proxy process.
  Process& proxy();
  // idem-test-upstream on upstream_port() (for a rig started without one).
  void start_upstream();

  std::uint16_t proxy_port() const { return proxy_port_; }
  std::uint16_t upstream_port() const { return upstream_port_; }
  int proxy_starts() const { return static_cast<int>(launcher_.started()); }
  const std::filesystem::path& config_path() const { return launcher_.config_path(); }

  // Upstream executions that received this Idempotency-Key.
  std::uint64_t upstream_count(std::string_view key) const;
  std::uint64_t upstream_total() const;

  RecordInspection inspect(std::string_view route, std::string_view key) const;
  // `idemproxy --release ROUTE KEY`: its exit status and output.
  RunResult release(std::string_view route, std::string_view key) const;

  // Every proxy process's stderr (the structured log), concatenated in start order.
  std::string proxy_logs() const;
  // Config and the tails of every process's logs: what a failing test prints.
  std::string diagnostics();

 private:
  RigOptions options_;
  TempDir work_dir_;
  std::uint16_t proxy_port_ = 0;
  std::uint16_t upstream_port_ = 0;
  std::optional<TestUpstream> upstream_;
  ProxyLauncher launcher_;  // declared after work_dir_: its processes go first
};

}  // namespace idem::test::failure
