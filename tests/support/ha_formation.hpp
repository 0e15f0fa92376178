#pragma once
// A real highly available Postgres for tests: a pg_auto_failover formation (a monitor and two data
// nodes, Postgres 15, loopback only, trust auth, no TLS) created in a temporary directory and run as
// supervised `pg_autoctl run` processes this object started and stops, by PID. Postgres refuses to
// run as root: as root every pg_autoctl command runs as the postgres user (setpriv, which execs in
// place, so a keeper's PID is pg_autoctl's own).
//
// Replication is synchronous from the start: both data nodes take part in the replication quorum,
// so pg_auto_failover sets synchronous_standby_names = 'ANY 1 (pgautofailover_standby_N)' on the
// primary (synchronous_commit stays on). make_asynchronous() takes the standby out of the quorum.
// The monitor's health checks and the keepers' promotion timeouts are shortened so that a failover
// takes seconds, not the defaults' ~30 s.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace idem::test {

struct HaNodeState {
  int node_id = 0;
  std::string name;
  std::uint16_t port = 0;
  std::string reported;  // pgautofailover.node.reportedstate
  std::string goal;      // pgautofailover.node.goalstate
};

class HaFormation {
 public:
  static constexpr int kNodes = 2;
  static constexpr const char* kDatabase = "idem";

  // Creates the monitor and both data nodes, starts them and waits until one node is primary and
  // the other secondary. Throws std::runtime_error with the logs when that does not happen within
  // `ready_timeout`.
  explicit HaFormation(std::chrono::milliseconds ready_timeout = std::chrono::seconds(120));
  // Stops every keeper (SIGTERM, then SIGKILL of whatever is left of its process tree).
  ~HaFormation();
  HaFormation(const HaFormation&) = delete;
  HaFormation& operator=(const HaFormation&) = delete;

  // postgresql://127.0.0.1:P1,127.0.0.1:P2/idem?user=postgres&target_session_attrs=read-write
  const std::string& dsn() const { return dsn_; }
  // key=value DSN of one data node (0 or 1), whatever its role.
  std::string node_dsn(int node) const;
  std::uint16_t node_port(int node) const { return nodes_.at(static_cast<std::size_t>(node)).port; }

  // The monitor's view of both data nodes.
  std::vector<HaNodeState> states() const;
  // "node1 primary/primary, node2 secondary/secondary": for messages.
  std::string describe_states() const;
  // Index of the node the monitor has as primary (reported and goal state primary or
  // wait_primary); nullopt while there is none.
  std::optional<int> primary() const;

  // The primary's synchronous_standby_names (SHOW, on the node itself).
  std::string synchronous_standby_names(int node) const;

  // kill -9 of the primary's whole process tree (its pg_autoctl keeper and every child: the
  // postgres service, the node-active service, the postmaster and its backends), frozen first
  // (SIGSTOP) so nothing restarts in between. The node stays down. Returns its index.
  int kill_primary();
  // The same for the secondary, the primary left running. While the monitor has not yet noticed
  // (seconds) the primary's synchronous_standby_names still names it: every commit on the primary
  // waits, until its keeper applies wait_primary and clears the setting. Returns its index.
  int kill_secondary();
  // Waits until a node other than `old_primary` is primary (reported and goal state primary or
  // wait_primary) and accepts writes. Its index; nullopt at the deadline.
  std::optional<int> wait_for_new_primary(int old_primary, std::chrono::milliseconds timeout) const;
  // `pg_autoctl perform switchover` (waits for it to finish). Throws on failure.
  void switchover(std::chrono::milliseconds timeout = std::chrono::seconds(90));
  // `pg_autoctl set node replication-quorum false` on the standby, then waits until the primary's
  // synchronous_standby_names is empty. Throws when it does not become empty in time.
  void make_asynchronous(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // How long the monitor waits after a node's last report before it acts on its failed health
  // checks (pgautofailover.node_considered_unhealthy_timeout: 20 s by default, 2 s in this
  // formation). Appended to the monitor's postgresql.conf and reloaded; returns once the monitor
  // reads the new value. Throws when it does not within 10 s.
  void set_node_unhealthy_timeout(std::chrono::milliseconds timeout);
  // SIGSTOP / SIGCONT of the primary's walsender processes: WAL stops reaching the standby while
  // commits go on (with asynchronous replication), a replication lag the test controls.
  void pause_wal_sender();
  void resume_wal_sender();

  // Tails of every pg_autoctl log, the monitor's view: what a failing test prints.
  std::string describe() const;

 private:
  struct Node {
    std::string name;
    std::uint16_t port = 0;
    std::filesystem::path dir;  // pgdata is dir/data
    std::optional<Process> keeper;
  };

  RunResult autoctl(const std::vector<std::string>& args, const std::string& log_name,
                    std::chrono::milliseconds timeout) const;
  Process start_keeper(const std::filesystem::path& pgdata, const std::string& log_name) const;
  ProcessSpec autoctl_spec(const std::vector<std::string>& args, const std::string& log_name) const;
  void create_monitor();
  void create_node(int index, std::chrono::steady_clock::time_point deadline);
  void wait_ready(std::chrono::steady_clock::time_point deadline);
  void kill_node(int index);
  void stop_all() noexcept;

  TempDir dir_;
  std::filesystem::path logs_;
  std::uint16_t monitor_port_ = 0;
  std::string monitor_uri_;
  std::optional<Process> monitor_;
  std::vector<Node> nodes_;
  std::vector<pid_t> paused_wal_senders_;
  std::string dsn_;
};

}  // namespace idem::test
