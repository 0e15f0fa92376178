#pragma once
// A child process for tests: started with fork/execve, its stdout and stderr written to files a
// test can read (and print when it fails). Owns exactly its one child: the destructor SIGKILLs and
// reaps it if it is still running, and nothing else is ever signalled.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::test {

struct ProcessSpec {
  std::string executable;  // path; not searched in $PATH
  std::vector<std::string> args;
  // Added to the inherited environment; a name given here replaces the inherited value.
  std::vector<std::pair<std::string, std::string>> env;
  std::filesystem::path log_dir;  // <log_dir>/<name>.stdout and .stderr; created if missing
  std::string name = "process";
};

class Process {
 public:
  // Throws std::runtime_error when the log files cannot be opened or execve fails.
  static Process start(const ProcessSpec& spec);

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  ~Process();

  pid_t pid() const { return pid_; }
  // True while the child has not exited (reaps it when it has).
  bool running();
  // Sends signo to the child if it still runs. False when it had already exited.
  bool signal(int signo);
  void kill9();
  // Waits up to timeout for the child to exit. Exit status, or 128 + signal number when a signal
  // ended it; nullopt when it still runs at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to grace, then SIGKILL. The exit status as wait_exit reports it.
  std::optional<int> terminate(std::chrono::milliseconds grace);

  const std::filesystem::path& stdout_path() const { return stdout_path_; }
  const std::filesystem::path& stderr_path() const { return stderr_path_; }
  std::string stdout_text() const;
  std::string stderr_text() const;
  // Polls stdout until a line containing needle appears; returns that line. nullopt on timeout or
  // when the process exits first.
  std::optional<std::string> wait_for_stdout_line(std::string_view needle, std::chrono::milliseconds timeout);

  std::string command_line() const;
  // Command line, state and the tails of both logs: what a failing test should print.
  std::string describe(std::size_t tail_bytes = 8192);

 private:
  Process() = default;
  void reap(int wait_status);
  void release() noexcept;

  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::vector<std::string> argv_;
  std::filesystem::path stdout_path_;
  std::filesystem::path stderr_path_;
};

struct RunResult {
  std::optional<int> exit_status;  // nullopt when the deadline passed (the child was killed)
  std::string stdout_text;
  std::string stderr_text;
};

// Runs a command to completion (SIGKILL at the deadline) and returns its status and output.
RunResult run_to_exit(const ProcessSpec& spec, std::chrono::milliseconds timeout);

// Whole file as bytes; "" when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace idem::test
