#include "support/ha_formation.hpp"

#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/ports.hpp"

namespace idem::test {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char* const kPgCtl = "/usr/lib/postgresql/15/bin/pg_ctl";
const char* const kPgAutoctl = "/usr/bin/pg_autoctl";
const char* const kSetpriv = "/usr/bin/setpriv";
constexpr auto kCommandTimeout = 90s;
constexpr auto kPoll = 100ms;

// The monitor's failure detection and the keepers' promotion steps, shortened from the defaults
// (health check every 5 s, a node unhealthy after 20 s, 30 s for an unreachable primary to demote)
// so that a failover takes a few seconds. Monitor GUCs, reloaded at start.
constexpr std::string_view kMonitorSettings = R"(
# idemproxy tests (tests/support/ha_formation.cpp): fast failure detection
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 2000
pgautofailover.primary_demote_timeout = 2000
pgautofailover.startup_grace_period = 1000
)";

struct ConnFree {
  void operator()(PGconn* connection) const { PQfinish(connection); }
};
struct ResultFree {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Connection = std::unique_ptr<PGconn, ConnFree>;
using Result = std::unique_ptr<PGresult, ResultFree>;

// Runs one statement; rows of text values. Throws with libpq's message.
std::vector<std::vector<std::string>> query(const std::string& dsn, const std::string& sql) {
  const bool uri = dsn.rfind("postgres", 0) == 0 && dsn.find("://") != std::string::npos;
  const std::string bounded = dsn + (uri ? (dsn.find('?') == std::string::npos ? "?" : "&") : " ") + "connect_timeout=2";
  const Connection connection(PQconnectdb(bounded.c_str()));
  if (!connection || PQstatus(connection.get()) != CONNECTION_OK) {
    throw std::runtime_error("connect " + dsn + ": " + (connection ? PQerrorMessage(connection.get()) : "oom"));
  }
  const Result result(PQexec(connection.get(), sql.c_str()));
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    throw std::runtime_error(sql + ": " + PQerrorMessage(connection.get()));
  }
  std::vector<std::vector<std::string>> rows;
  for (int row = 0; row < PQntuples(result.get()); ++row) {
    std::vector<std::string> values;
    for (int column = 0; column < PQnfields(result.get()); ++column) values.emplace_back(PQgetvalue(result.get(), row, column));
    rows.push_back(std::move(values));
  }
  return rows;
}

std::string describe_run(const RunResult& result) {
  return "exit status: " + (result.exit_status ? std::to_string(*result.exit_status) : std::string("timeout")) +
         "\n--- stdout ---\n" + result.stdout_text + "\n--- stderr ---\n" + result.stderr_text;
}

bool running_as_root() { return ::geteuid() == 0; }

// Hands a directory to the postgres user (when we are root, who else would own it).
void give_to_postgres(const std::filesystem::path& path, const std::filesystem::path& log_dir) {
  if (!running_as_root()) return;
  const RunResult result =
      run_to_exit(ProcessSpec{"/bin/chown", {"-R", "postgres:postgres", path.string()}, {}, log_dir, "chown"}, 10s);
  if (result.exit_status != 0) throw std::runtime_error("chown " + path.string() + ": " + describe_run(result));
}

// Parent PID of every process, from /proc.
std::map<pid_t, pid_t> parents() {
  std::map<pid_t, pid_t> parent_of;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const std::string stat = read_file(entry.path() / "stat");
    // pid (comm) state ppid ...: comm may hold anything, so parse after its last ')'.
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent_of[static_cast<pid_t>(std::stol(name))] = ppid;
  }
  return parent_of;
}

// root and every process descending from it, root first.
std::vector<pid_t> process_tree(pid_t root) {
  const std::map<pid_t, pid_t> parent_of = parents();
  std::vector<pid_t> tree{root};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    for (const auto& [pid, ppid] : parent_of) {
      if (ppid == tree[i]) tree.push_back(pid);
    }
  }
  return tree;
}

std::string command_line_of(pid_t pid) {
  std::string text = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// SIGSTOP to every process in the tree (so no supervisor restarts a child), then SIGKILL to each.
void kill_tree(pid_t root) {
  const std::vector<pid_t> tree = process_tree(root);
  for (const pid_t pid : tree) ::kill(pid, SIGSTOP);
  // Children forked between the listing and the stop: list again, now that nothing moves.
  const std::vector<pid_t> frozen = process_tree(root);
  for (const pid_t pid : frozen) ::kill(pid, SIGSTOP);
  for (const pid_t pid : frozen) ::kill(pid, SIGKILL);
}

bool is_primary_state(const std::string& state) { return state == "primary" || state == "wait_primary"; }

}  // namespace

HaFormation::HaFormation(std::chrono::milliseconds ready_timeout) : dir_("idem-ha") {
  const auto deadline = Clock::now() + ready_timeout;
  // The postgres user must reach its directories under our temp dir.
  std::filesystem::permissions(dir_.path(), std::filesystem::perms(0755));
  logs_ = dir_.path() / "logs";
  std::filesystem::create_directories(logs_);
  for (const char* sub : {"xdg", "monitor", "node1", "node2"}) {
    std::filesystem::create_directories(dir_.path() / sub);
    give_to_postgres(dir_.path() / sub, logs_);
  }
  try {
    create_monitor();
    for (int index = 0; index < kNodes; ++index) {
      Node node;
      node.name = "node" + std::to_string(index + 1);
      node.dir = dir_.path() / node.name;
      node.port = free_port();
      nodes_.push_back(std::move(node));
    }
    for (int index = 0; index < kNodes; ++index) create_node(index, deadline);
    wait_ready(deadline);
  } catch (...) {
    stop_all();
    throw;
  }
  dsn_ = "postgresql://127.0.0.1:" + std::to_string(nodes_[0].port) + ",127.0.0.1:" + std::to_string(nodes_[1].port) +
         "/" + kDatabase + "?user=postgres&target_session_attrs=read-write";
}

HaFormation::~HaFormation() { stop_all(); }

ProcessSpec HaFormation::autoctl_spec(const std::vector<std::string>& args, const std::string& log_name) const {
  const std::filesystem::path xdg = dir_.path() / "xdg";
  ProcessSpec spec;
  spec.env = {{"XDG_CONFIG_HOME", (xdg / "config").string()},
              {"XDG_DATA_HOME", (xdg / "data").string()},
              {"XDG_RUNTIME_DIR", (xdg / "run").string()}};
  spec.log_dir = logs_;
  spec.name = log_name;
  if (running_as_root()) {
    spec.executable = kSetpriv;
    spec.args = {"--reuid=postgres", "--regid=postgres", "--init-groups", "--", kPgAutoctl};
  } else {
    spec.executable = kPgAutoctl;
  }
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  return spec;
}

RunResult HaFormation::autoctl(const std::vector<std::string>& args, const std::string& log_name,
                               std::chrono::milliseconds timeout) const {
  return run_to_exit(autoctl_spec(args, log_name), timeout);
}

Process HaFormation::start_keeper(const std::filesystem::path& pgdata, const std::string& log_name) const {
  return Process::start(autoctl_spec({"run", "--pgdata", pgdata.string()}, log_name));
}

void HaFormation::create_monitor() {
  const std::filesystem::path pgdata = dir_.path() / "monitor" / "data";
  for (int attempt = 1;; ++attempt) {
    monitor_port_ = free_port();
    const RunResult created = autoctl({"create", "monitor", "--pgctl", kPgCtl, "--pgdata", pgdata.string(), "--pgport",
                                       std::to_string(monitor_port_), "--hostname", "127.0.0.1", "--listen", "127.0.0.1",
                                       "--auth", "trust", "--no-ssl"},
                                      "create-monitor", kCommandTimeout);
    if (created.exit_status == 0) break;
    if (attempt == 2) throw std::runtime_error("pg_autoctl create monitor failed:\n" + describe_run(created));
    std::filesystem::remove_all(pgdata);  // a port taken in between: once more on another
  }
  {
    std::ofstream conf(pgdata / "postgresql.conf", std::ios::app);
    conf << kMonitorSettings;
    if (!conf) throw std::runtime_error("cannot append to the monitor's postgresql.conf");
  }
  monitor_uri_ = "postgres://autoctl_node@127.0.0.1:" + std::to_string(monitor_port_) + "/pg_auto_failover?sslmode=disable";
  monitor_.emplace(start_keeper(pgdata, "monitor"));
  const auto deadline = Clock::now() + 30s;
  while (Clock::now() < deadline) {
    try {
      query(monitor_uri_, "SELECT 1");
      return;
    } catch (const std::exception&) {
      if (!monitor_->running()) break;
      std::this_thread::sleep_for(kPoll);
    }
  }
  throw std::runtime_error("the pg_auto_failover monitor did not come up:\n" + monitor_->describe());
}

void HaFormation::create_node(int index, Clock::time_point deadline) {
  Node& node = nodes_.at(static_cast<std::size_t>(index));
  const std::filesystem::path pgdata = node.dir / "data";
  // Creating a standby takes a base backup of the primary, whose checkpoint is a spread one (up to
  // minutes): a CHECKPOINT on the primary meanwhile makes it finish at once.
  ProcessSpec spec = autoctl_spec({"create", "postgres", "--pgctl", kPgCtl, "--pgdata", pgdata.string(), "--pgport",
                                   std::to_string(node.port), "--pghost", "127.0.0.1", "--listen", "127.0.0.1",
                                   "--hostname", "127.0.0.1", "--name", node.name, "--dbname", kDatabase, "--auth",
                                   "trust", "--no-ssl", "--monitor", monitor_uri_},
                                  "create-" + node.name);
  Process creating = Process::start(spec);
  while (creating.running() && Clock::now() < deadline) {
    if (index > 0) {
      try {
        query(node_dsn(0), "CHECKPOINT");
      } catch (const std::exception&) {
        // not up yet, or busy: the next round
      }
    }
    std::this_thread::sleep_for(500ms);
  }
  const std::optional<int> status = creating.wait_exit(100ms);
  if (status != 0) {
    const std::string what = creating.describe();
    throw std::runtime_error("pg_autoctl create postgres (" + node.name + ") failed:\n" + what + describe());
  }
  // A standby whose WAL receiver hangs on to a dead primary is promoted after 1 s, not 5 s.
  const RunResult set = autoctl({"config", "set", "--pgdata", pgdata.string(), "timeout.prepare_promotion_walreceiver", "1"},
                                "config-set-" + node.name, kCommandTimeout);
  if (set.exit_status != 0) throw std::runtime_error("pg_autoctl config set failed:\n" + describe_run(set));
  node.keeper.emplace(start_keeper(pgdata, "keeper-" + node.name));
}

void HaFormation::wait_ready(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    try {
      const std::vector<HaNodeState> now = states();
      const auto settled = [&](const char* state) {
        return std::count_if(now.begin(), now.end(), [&](const HaNodeState& node) {
                 return node.reported == state && node.goal == state;
               }) == 1;
      };
      if (now.size() == kNodes && settled("primary") && settled("secondary")) return;
      if (const std::optional<int> first = primary()) query(node_dsn(*first), "CHECKPOINT");
    } catch (const std::exception&) {
      // the monitor or a node is still starting
    }
    for (Node& node : nodes_) {
      if (node.keeper && !node.keeper->running()) {
        throw std::runtime_error("pg_autoctl run (" + node.name + ") exited:\n" + node.keeper->describe() + describe());
      }
    }
    std::this_thread::sleep_for(200ms);
  }
  throw std::runtime_error("the formation did not reach primary + secondary in time:\n" + describe());
}

std::string HaFormation::node_dsn(int node) const {
  return "host=127.0.0.1 port=" + std::to_string(node_port(node)) + " user=postgres dbname=" + kDatabase;
}

std::vector<HaNodeState> HaFormation::states() const {
  std::vector<HaNodeState> result;
  for (const auto& row : query(monitor_uri_,
                               "SELECT nodeid, nodename, nodeport, reportedstate, goalstate FROM pgautofailover.node "
                               "ORDER BY nodeid")) {
    result.push_back(HaNodeState{std::stoi(row[0]), row[1], static_cast<std::uint16_t>(std::stoi(row[2])), row[3], row[4]});
  }
  return result;
}

std::string HaFormation::describe_states() const {
  try {
    std::string text;
    for (const HaNodeState& node : states()) {
      if (!text.empty()) text += ", ";
      text += node.name + " " + node.reported + "/" + node.goal;
    }
    return text;
  } catch (const std::exception& error) {
    return std::string("(monitor: ") + error.what() + ")";
  }
}

std::optional<int> HaFormation::primary() const {
  for (const HaNodeState& state : states()) {
    if (!is_primary_state(state.reported) || state.reported != state.goal) continue;
    for (int index = 0; index < kNodes; ++index) {
      if (node_port(index) == state.port) return index;
    }
  }
  return std::nullopt;
}

std::string HaFormation::synchronous_standby_names(int node) const {
  return query(node_dsn(node), "SHOW synchronous_standby_names").at(0).at(0);
}

void HaFormation::kill_node(int index) {
  Node& node = nodes_.at(static_cast<std::size_t>(index));
  if (!node.keeper || !node.keeper->running())
    throw std::logic_error("kill: " + node.name + "'s keeper is not running");
  kill_tree(node.keeper->pid());
  if (!node.keeper->wait_exit(10s)) throw std::runtime_error(node.name + "'s keeper survived SIGKILL");
}

int HaFormation::kill_primary() {
  const std::optional<int> index = primary();
  if (!index) throw std::runtime_error("kill_primary: no primary (" + describe_states() + ")");
  kill_node(*index);
  paused_wal_senders_.clear();  // they died with it
  return *index;
}

int HaFormation::kill_secondary() {
  const std::optional<int> first = primary();
  if (!first) throw std::runtime_error("kill_secondary: no primary (" + describe_states() + ")");
  const int standby = 1 - *first;
  kill_node(standby);
  return standby;
}

std::optional<int> HaFormation::wait_for_new_primary(int old_primary, std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    try {
      const std::optional<int> now = primary();
      if (now && *now != old_primary &&
          query(node_dsn(*now), "SELECT pg_is_in_recovery()::text").at(0).at(0) == "false") {
        return now;
      }
    } catch (const std::exception&) {
      // the monitor is busy or the node still recovering
    }
    std::this_thread::sleep_for(kPoll);
  }
  return std::nullopt;
}

void HaFormation::switchover(std::chrono::milliseconds timeout) {
  const RunResult result =
      autoctl({"perform", "switchover", "--monitor", monitor_uri_, "--formation", "default"}, "switchover", timeout);
  if (result.exit_status != 0) throw std::runtime_error("pg_autoctl perform switchover failed:\n" + describe_run(result));
}

void HaFormation::make_asynchronous(std::chrono::milliseconds timeout) {
  const std::optional<int> first = primary();
  if (!first) throw std::runtime_error("make_asynchronous: no primary (" + describe_states() + ")");
  const int standby = 1 - *first;
  const std::filesystem::path pgdata = nodes_.at(static_cast<std::size_t>(standby)).dir / "data";
  // It may warn that it could not list the other nodes afterwards; the setting is what counts.
  const RunResult result = autoctl({"set", "node", "replication-quorum", "false", "--pgdata", pgdata.string()},
                                   "set-replication-quorum", kCommandTimeout);
  if (result.exit_status != 0) throw std::runtime_error("pg_autoctl set node replication-quorum failed:\n" + describe_run(result));
  const auto deadline = Clock::now() + timeout;
  std::string names;
  while (Clock::now() < deadline) {
    names = synchronous_standby_names(*first);
    if (names.empty()) return;
    std::this_thread::sleep_for(kPoll);
  }
  throw std::runtime_error("synchronous_standby_names is still '" + names + "' on the primary");
}

void HaFormation::set_node_unhealthy_timeout(std::chrono::milliseconds timeout) {
  const std::filesystem::path pgdata = dir_.path() / "monitor" / "data";
  const std::string value = std::to_string(timeout.count());
  {
    std::ofstream conf(pgdata / "postgresql.conf", std::ios::app);
    conf << "pgautofailover.node_considered_unhealthy_timeout = " << value << "\n";
    if (!conf) throw std::runtime_error("cannot append to the monitor's postgresql.conf");
  }
  const std::string pid_file = read_file(pgdata / "postmaster.pid");
  const pid_t postmaster = pid_file.empty() ? 0 : static_cast<pid_t>(std::stol(pid_file));
  if (postmaster <= 0 || ::kill(postmaster, SIGHUP) != 0)
    throw std::runtime_error("cannot reload the monitor's postgres");
  const auto deadline = Clock::now() + 10s;
  std::string now;
  while (Clock::now() < deadline) {
    now = query(monitor_uri_,
                "SELECT setting FROM pg_settings WHERE name = 'pgautofailover.node_considered_unhealthy_timeout'")
              .at(0)
              .at(0);
    if (now == value) return;
    std::this_thread::sleep_for(kPoll);
  }
  throw std::runtime_error("the monitor's node_considered_unhealthy_timeout is " + now + ", not " + value);
}

void HaFormation::pause_wal_sender() {
  const std::optional<int> index = primary();
  if (!index) throw std::runtime_error("pause_wal_sender: no primary (" + describe_states() + ")");
  const Node& node = nodes_.at(static_cast<std::size_t>(*index));
  for (const pid_t pid : process_tree(node.keeper->pid())) {
    if (command_line_of(pid).find("walsender") == std::string::npos) continue;
    if (::kill(pid, SIGSTOP) == 0) paused_wal_senders_.push_back(pid);
  }
  if (paused_wal_senders_.empty()) throw std::runtime_error("pause_wal_sender: the primary has no walsender");
}

void HaFormation::resume_wal_sender() {
  for (const pid_t pid : paused_wal_senders_) ::kill(pid, SIGCONT);
  paused_wal_senders_.clear();
}

std::string HaFormation::describe() const {
  std::ostringstream out;
  out << "=== pg_auto_failover formation in " << dir_.path().string() << ": " << describe_states() << " ===\n";
  if (!std::filesystem::exists(logs_)) return out.str();
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(logs_)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const std::string text = read_file(file);
    if (text.empty()) continue;
    constexpr std::size_t kTail = 3072;
    out << "--- " << file.filename().string() << " (tail) ---\n"
        << (text.size() > kTail ? text.substr(text.size() - kTail) : text) << "\n";
  }
  return out.str();
}

void HaFormation::stop_all() noexcept {
  resume_wal_sender();
  // Data nodes first (their keepers report to the monitor while stopping), then the monitor: a
  // SIGTERM stops each keeper's Postgres (fast shutdown); whatever is left after the grace period
  // is killed, process tree and all.
  std::vector<Process*> keepers;
  for (Node& node : nodes_) {
    if (node.keeper) keepers.push_back(&*node.keeper);
  }
  if (monitor_) keepers.push_back(&*monitor_);
  for (Process* keeper : keepers) {
    if (!keeper->running()) continue;
    try {
      keeper->signal(SIGTERM);
      if (!keeper->wait_exit(15s)) {
        kill_tree(keeper->pid());
        keeper->wait_exit(5s);
      }
    } catch (const std::exception&) {
      // best effort: the Process destructor SIGKILLs what is left
    }
  }
  // A postmaster outliving its keeper (killed or not) is ours too: stop it by the PID it wrote.
  std::vector<std::filesystem::path> data_dirs{dir_.path() / "monitor" / "data"};
  for (const Node& node : nodes_) data_dirs.push_back(node.dir / "data");
  for (const auto& data : data_dirs) {
    const std::string pid_file = read_file(data / "postmaster.pid");
    if (pid_file.empty()) continue;
    try {
      const pid_t pid = static_cast<pid_t>(std::stol(pid_file));
      if (pid > 0 && command_line_of(pid).find(data.string()) != std::string::npos) kill_tree(pid);
    } catch (const std::exception&) {
      // not a number: nothing is running there
    }
  }
}

}  // namespace idem::test
