#pragma once
// The one way tests run the idemproxy binary. A ProxyLauncher owns one config file in a work
// directory (rendered from a template with variables, or given as text), runs commands against it
// to completion (--migrate, --check, --inspect ...) and starts proxy processes from it, waits until
// one is ready (its port accepts connections) and stops it by its PID (SIGTERM, then SIGKILL).
// Every process's stdout and stderr are captured in <work_dir>/<name>.stdout and .stderr.
// Built on support/process (the generic spawner). Blocking: test threads only.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/config_text.hpp"
#include "support/process.hpp"

namespace idem::test {

// Extra environment for idemproxy (a name given here replaces the inherited value).
using EnvVars = std::vector<std::pair<std::string, std::string>>;

// `idemproxy <args...>` to completion (SIGKILL at the deadline), logs in <log_dir>/<name>.*: for
// commands that need no config file of the launcher's (--version, a bad flag, a config of the test's own).
RunResult run_idemproxy(std::vector<std::string> args, const std::filesystem::path& log_dir, std::string_view name,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30), const EnvVars& env = {});

// Exit status and both outputs of a command: what a failing test prints.
std::string describe_run(const RunResult& result);

class ProxyLauncher {
 public:
  // work_dir must exist and outlive the launcher (e.g. a TempDir declared before it).
  explicit ProxyLauncher(std::filesystem::path work_dir, EnvVars env = {});
  // Every process still running is SIGKILLed and reaped (Process's destructor).
  ~ProxyLauncher();
  ProxyLauncher(const ProxyLauncher&) = delete;
  ProxyLauncher& operator=(const ProxyLauncher&) = delete;

  // Writes <work_dir>/<file_name>, which the commands and processes started from now on use:
  // config_template with variables rendered (render_template), or text as it is.
  const std::filesystem::path& write_config(std::string_view config_template,
                                            const std::map<std::string, std::string>& variables,
                                            std::string_view file_name = "idemproxy.yaml");
  const std::filesystem::path& write_config_text(std::string text, std::string_view file_name = "idemproxy.yaml");
  const std::filesystem::path& config_path() const { return config_path_; }
  const std::string& config_text() const { return config_text_; }
  const std::filesystem::path& work_dir() const { return work_dir_; }

  // `idemproxy --config <config> <args...>` to completion.
  RunResult run(std::vector<std::string> args, std::string_view name,
                std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  // `--migrate`; throws std::runtime_error with its output and the config unless it exits 0.
  void migrate(std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;

  // Starts `idemproxy --config <config> <args...>` without waiting for anything. The process is
  // the launcher's (references stay valid while it lives).
  Process& start(std::string_view name, std::vector<std::string> args = {});
  // start(), then waits until 127.0.0.1:port accepts connections. Should the process exit or
  // the timeout pass first, it is stopped and std::runtime_error thrown with its logs and the config.
  Process& start_listening(std::uint16_t port, std::string_view name,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20));

  std::size_t started() const { return processes_.size(); }
  // The last process started; throws std::logic_error when there is none.
  Process& last();
  // SIGTERM to the last process, SIGKILL after grace: its exit status (128 + signal when a signal
  // ended it); nullopt when none was started.
  std::optional<int> stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

  // Every process's stderr (the structured log), concatenated in start order.
  std::string logs() const;
  // The config and the logs' tails of the last `shown` processes: what a failing test prints.
  std::string diagnostics(std::size_t shown = 3, std::size_t tail_bytes = 8192);

 private:
  std::filesystem::path work_dir_;
  EnvVars env_;
  std::filesystem::path config_path_;
  std::string config_text_;
  std::deque<Process> processes_;
};

}  // namespace idem::test
