#include "support/proxy_launcher.hpp"

#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/env.hpp"
#include "support/ports.hpp"

namespace idem::test {

namespace {

ProcessSpec idemproxy_spec(std::vector<std::string> args, const std::filesystem::path& log_dir, std::string_view name,
                           const EnvVars& env) {
  return ProcessSpec{
      .executable = idemproxy_binary(), .args = std::move(args), .env = env, .log_dir = log_dir, .name = std::string(name)};
}

}  // namespace

RunResult run_idemproxy(std::vector<std::string> args, const std::filesystem::path& log_dir, std::string_view name,
                        std::chrono::milliseconds timeout, const EnvVars& env) {
  return run_to_exit(idemproxy_spec(std::move(args), log_dir, name, env), timeout);
}

std::string describe_run(const RunResult& result) {
  return "exit status: " + (result.exit_status ? std::to_string(*result.exit_status) : std::string("timeout")) +
         "\n--- stdout ---\n" + result.stdout_text + "\n--- stderr ---\n" + result.stderr_text + "\n";
}

ProxyLauncher::ProxyLauncher(std::filesystem::path work_dir, EnvVars env)
    : work_dir_(std::move(work_dir)), env_(std::move(env)), config_path_(work_dir_ / "idemproxy.yaml") {}

ProxyLauncher::~ProxyLauncher() = default;

const std::filesystem::path& ProxyLauncher::write_config(std::string_view config_template,
                                                         const std::map<std::string, std::string>& variables,
                                                         std::string_view file_name) {
  return write_config_text(render_template(config_template, variables), file_name);
}

const std::filesystem::path& ProxyLauncher::write_config_text(std::string text, std::string_view file_name) {
  config_path_ = work_dir_ / std::string(file_name);
  config_text_ = std::move(text);
  write_file(config_path_, config_text_);
  return config_path_;
}

RunResult ProxyLauncher::run(std::vector<std::string> args, std::string_view name,
                             std::chrono::milliseconds timeout) const {
  args.insert(args.begin(), {"--config", config_path_.string()});
  return run_idemproxy(std::move(args), work_dir_, name, timeout, env_);
}

void ProxyLauncher::migrate(std::chrono::milliseconds timeout) const {
  const RunResult result = run({"--migrate"}, "migrate", timeout);
  if (result.exit_status != 0) {
    throw std::runtime_error("idemproxy --migrate failed:\n" + describe_run(result) + "--- config ---\n" + config_text_);
  }
}

Process& ProxyLauncher::start(std::string_view name, std::vector<std::string> args) {
  args.insert(args.begin(), {"--config", config_path_.string()});
  processes_.push_back(Process::start(idemproxy_spec(std::move(args), work_dir_, name, env_)));
  return processes_.back();
}

Process& ProxyLauncher::start_listening(std::uint16_t port, std::string_view name,
                                        std::chrono::milliseconds timeout) {
  Process& process = start(name);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process.running() && !port_accepts(port) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (process.running() && port_accepts(port)) return process;
  const std::string failure = process.describe();
  process.terminate(std::chrono::seconds(2));
  throw std::runtime_error("idemproxy did not start listening on 127.0.0.1:" + std::to_string(port) + ":\n" + failure +
                           "--- config ---\n" + config_text_);
}

Process& ProxyLauncher::last() {
  if (processes_.empty()) throw std::logic_error("no idemproxy was started");
  return processes_.back();
}

std::optional<int> ProxyLauncher::stop(std::chrono::milliseconds grace) {
  if (processes_.empty()) return std::nullopt;
  return processes_.back().terminate(grace);
}

std::string ProxyLauncher::logs() const {
  std::string logs;
  for (const Process& process : processes_) logs += process.stderr_text();
  return logs;
}

std::string ProxyLauncher::diagnostics(std::size_t shown, std::size_t tail_bytes) {
  std::ostringstream out;
  out << "=== config " << config_path_.string() << " ===\n" << config_text_ << "\n";
  // A soak restarts the proxy dozens of times: the last few runs are the ones worth reading.
  const std::size_t first_shown = processes_.size() > shown ? processes_.size() - shown : 0;
  if (first_shown > 0) out << "(" << first_shown << " earlier idemproxy runs not shown)\n";
  for (std::size_t i = first_shown; i < processes_.size(); ++i) {
    out << "=== idemproxy run " << i + 1 << " ===\n" << processes_[i].describe(tail_bytes) << "\n";
  }
  return out.str();
}

}  // namespace idem::test
