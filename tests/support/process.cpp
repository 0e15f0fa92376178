#include "support/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace idem::test {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(10);

// An fd closed when it goes out of scope (parent-side bookkeeping around fork).
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

FileDescriptor open_or_throw(const std::filesystem::path& path, int flags) {
  FileDescriptor fd(::open(path.c_str(), flags | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw std::runtime_error("open(" + path.string() + "): " + std::strerror(errno));
  return fd;
}

std::vector<std::string> build_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view item = *entry;
    const std::string_view name = item.substr(0, item.find('='));
    bool overridden = false;
    for (const auto& [extra_name, value] : extra) overridden = overridden || extra_name == name;
    if (!overridden) env.emplace_back(item);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

std::string tail(const std::string& text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  return "[... " + std::to_string(text.size() - bytes) + " bytes cut ...]\n" + text.substr(text.size() - bytes);
}

}  // namespace

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Process Process::start(const ProcessSpec& spec) {
  std::filesystem::create_directories(spec.log_dir);
  Process process;
  process.stdout_path_ = spec.log_dir / (spec.name + ".stdout");
  process.stderr_path_ = spec.log_dir / (spec.name + ".stderr");
  process.argv_.push_back(spec.executable);
  process.argv_.insert(process.argv_.end(), spec.args.begin(), spec.args.end());

  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> argv_storage = process.argv_;
  std::vector<std::string> env_storage = build_environment(spec.env);
  std::vector<char*> argv = pointers_to(argv_storage);
  std::vector<char*> envp = pointers_to(env_storage);
  const FileDescriptor dev_null = open_or_throw("/dev/null", O_RDONLY);
  const FileDescriptor out = open_or_throw(process.stdout_path_, O_WRONLY | O_CREAT | O_TRUNC);
  const FileDescriptor err = open_or_throw(process.stderr_path_, O_WRONLY | O_CREAT | O_TRUNC);
  // The child reports a failed execve through this pipe; a successful exec closes it (CLOEXEC).
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  FileDescriptor exec_read(exec_pipe[0]);
  FileDescriptor exec_write(exec_pipe[1]);

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(dev_null.get(), STDIN_FILENO);
    ::dup2(out.get(), STDOUT_FILENO);
    ::dup2(err.get(), STDERR_FILENO);
    // Sockets and files the test process holds must not leak into the child.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execve(argv[0], argv.data(), envp.data());
    const int error = errno;
    [[maybe_unused]] const auto written = ::write(exec_write.get(), &error, sizeof error);
    ::_exit(127);
  }
  process.pid_ = pid;
  exec_write.reset();
  int child_errno = 0;
  ssize_t got = 0;
  do {
    got = ::read(exec_read.get(), &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    process.pid_ = -1;
    throw std::runtime_error("execve(" + spec.executable + "): " + std::strerror(child_errno));
  }
  return process;
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exit_status_(other.exit_status_),
      argv_(std::move(other.argv_)),
      stdout_path_(std::move(other.stdout_path_)),
      stderr_path_(std::move(other.stderr_path_)) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    exit_status_ = other.exit_status_;
    argv_ = std::move(other.argv_);
    stdout_path_ = std::move(other.stdout_path_);
    stderr_path_ = std::move(other.stderr_path_);
  }
  return *this;
}

Process::~Process() { release(); }

void Process::release() noexcept {
  if (pid_ > 0 && !exit_status_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

void Process::reap(int wait_status) {
  if (WIFEXITED(wait_status)) {
    exit_status_ = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    exit_status_ = 128 + WTERMSIG(wait_status);
  }
}

bool Process::running() {
  if (pid_ <= 0 || exit_status_) return false;
  int status = 0;
  const pid_t result = ::waitpid(pid_, &status, WNOHANG);
  if (result == pid_) {
    reap(status);
    return false;
  }
  return result == 0;
}

bool Process::signal(int signo) {
  if (!running()) return false;
  return ::kill(pid_, signo) == 0;
}

void Process::kill9() { signal(SIGKILL); }

std::optional<int> Process::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(kPollInterval);
  }
  return exit_status_;
}

std::optional<int> Process::terminate(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  if (auto status = wait_exit(grace)) return status;
  kill9();
  return wait_exit(std::chrono::seconds(10));
}

std::string Process::stdout_text() const { return read_file(stdout_path_); }
std::string Process::stderr_text() const { return read_file(stderr_path_); }

std::optional<std::string> Process::wait_for_stdout_line(std::string_view needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const std::string text = stdout_text();
    std::size_t begin = 0;
    while (begin < text.size()) {
      const auto end = text.find('\n', begin);
      if (end == std::string::npos) break;  // only complete lines count
      const std::string_view line(text.data() + begin, end - begin);
      if (line.find(needle) != std::string_view::npos) return std::string(line);
      begin = end + 1;
    }
    if (!running() || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string Process::command_line() const {
  std::string line;
  for (const auto& arg : argv_) {
    if (!line.empty()) line += ' ';
    line += arg;
  }
  return line;
}

std::string Process::describe(std::size_t tail_bytes) {
  std::ostringstream out;
  out << "$ " << command_line() << "\n";
  if (running()) {
    out << "(pid " << pid_ << ", running)\n";
  } else if (exit_status_) {
    out << "(exited with status " << *exit_status_ << ")\n";
  }
  out << "--- stdout (" << stdout_path_.string() << ") ---\n" << tail(stdout_text(), tail_bytes) << "\n";
  out << "--- stderr (" << stderr_path_.string() << ") ---\n" << tail(stderr_text(), tail_bytes) << "\n";
  return out.str();
}

RunResult run_to_exit(const ProcessSpec& spec, std::chrono::milliseconds timeout) {
  Process process = Process::start(spec);
  RunResult result;
  result.exit_status = process.wait_exit(timeout);
  if (!result.exit_status) {
    process.kill9();
    process.wait_exit(std::chrono::seconds(10));
  }
  result.stdout_text = process.stdout_text();
  result.stderr_text = process.stderr_text();
  return result;
}

}  // namespace idem::test
