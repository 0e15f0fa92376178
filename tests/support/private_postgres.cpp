#include "support/private_postgres.hpp"

#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "support/process.hpp"

namespace idem::test {

namespace {

constexpr std::chrono::milliseconds kInitTimeout{90'000};
constexpr std::chrono::milliseconds kCtlTimeout{60'000};

// idem_start_postgres exports the port; the scripts print it where this side can read it.
constexpr std::string_view kStartScript =
    R"(source "$0" && idem_start_postgres "$1" && printf 'IDEMPROXY_PG_PORT=%s\n' "$IDEMPROXY_PG_PORT")";
// idem_start_postgres sets synchronous_commit = off (fine for a cluster nobody crashes); the
// synchronous mode overrides it and restarts before anyone connects.
constexpr std::string_view kSynchronousStartScript = R"(source "$0" && idem_start_postgres "$1" &&
printf 'synchronous_commit = on\n' >> "$1/pgdata/idemproxy-local.conf" &&
"$1/bin/pg_ctl" -D "$1/pgdata" -w -t 60 -m fast restart >/dev/null &&
printf 'IDEMPROXY_PG_PORT=%s\n' "$IDEMPROXY_PG_PORT")";
constexpr std::string_view kPortPrefix = "IDEMPROXY_PG_PORT=";

std::string describe_run(const RunResult& result) {
  return "exit status: " + (result.exit_status ? std::to_string(*result.exit_status) : std::string("timeout")) +
         "\n--- stdout ---\n" + result.stdout_text + "\n--- stderr ---\n" + result.stderr_text;
}

}  // namespace

PrivatePostgres::PrivatePostgres(CommitMode commit_mode) : dir_("idem-pg") {
  const std::string script = std::string(IDEM_SOURCE_DIR) + "/deploy/local-env.sh";
  const std::string_view start_script = commit_mode == CommitMode::synchronous ? kSynchronousStartScript : kStartScript;
  ProcessSpec spec{"/bin/bash", {"-c", std::string(start_script), script, dir_.path().string()}, {},
                   dir_.path() / "logs", "idem_start_postgres"};
  const RunResult result = run_to_exit(spec, kInitTimeout);
  const auto at = result.stdout_text.find(kPortPrefix);
  if (result.exit_status != 0 || at == std::string::npos) {
    throw std::runtime_error("could not start a private Postgres cluster:\n" + describe_run(result) + log_tail());
  }
  port_ = static_cast<std::uint16_t>(std::stoi(result.stdout_text.substr(at + kPortPrefix.size())));
  dsn_ = "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres";
}

PrivatePostgres::~PrivatePostgres() {
  if (!std::filesystem::exists(dir_.path() / "pgdata" / "postmaster.pid")) return;
  try {
    pg_ctl({"stop", "-m", "immediate"}, kCtlTimeout);
  } catch (const std::exception&) {
    // Nothing more to do from a destructor: the server's data directory is removed anyway.
  }
}

void PrivatePostgres::pg_ctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout) const {
  std::vector<std::string> argv{"-D", (dir_.path() / "pgdata").string(), "-w", "-t", "60"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessSpec spec{(dir_.path() / "bin" / "pg_ctl").string(), argv, {}, dir_.path() / "logs", "pg_ctl"};
  const RunResult result = run_to_exit(spec, timeout);
  if (result.exit_status != 0) {
    throw std::runtime_error("pg_ctl " + args.front() + " failed:\n" + describe_run(result) + log_tail());
  }
}

void PrivatePostgres::stop_immediate() { pg_ctl({"stop", "-m", "immediate"}, kCtlTimeout); }

void PrivatePostgres::start() { pg_ctl({"start"}, kCtlTimeout); }

std::string PrivatePostgres::log_tail(std::size_t bytes) const {
  const std::string log = read_file(dir_.path() / "postgres.log");
  const std::string tail = log.size() <= bytes ? log : log.substr(log.size() - bytes);
  return "\n--- postgres.log (tail) ---\n" + tail;
}

}  // namespace idem::test
