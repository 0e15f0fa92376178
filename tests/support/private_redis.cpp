#include "support/private_redis.hpp"

#include <csignal>

#include <stdexcept>

#include "support/ports.hpp"

namespace idem::test {
namespace {

constexpr std::chrono::seconds kStartTimeout{10};
constexpr int kStartAttempts = 3;  // a free port may be taken before the server binds it

}  // namespace

PrivateRedis::PrivateRedis(std::filesystem::path dir, std::vector<std::string> extra_args)
    : dir_(std::move(dir)), extra_args_(std::move(extra_args)) {
  std::filesystem::create_directories(dir_);
  std::string failures;
  for (int attempt = 1; attempt <= kStartAttempts; ++attempt) {
    port_ = free_port();
    start();
    if (wait_for_port(port_, kStartTimeout)) return;
    failures += process_->describe(2048);
    process_->kill9();
    process_.reset();
  }
  throw std::runtime_error("redis-server did not start:\n" + failures);
}

PrivateRedis::~PrivateRedis() {
  if (process_ && paused_) process_->signal(SIGCONT);
  if (process_) process_->kill9();
}

void PrivateRedis::start() {
  std::vector<std::string> args{"--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", dir_.string()};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  process_.emplace(Process::start(
      ProcessSpec{"/usr/bin/redis-server", args, {}, dir_, "redis-" + std::to_string(++generation_)}));
}

void PrivateRedis::kill() {
  if (!process_) return;
  if (paused_) process_->signal(SIGCONT);
  paused_ = false;
  process_->kill9();
  process_.reset();
}

void PrivateRedis::restart() {
  kill();
  start();
  if (!wait_for_port(port_, kStartTimeout)) throw std::runtime_error("redis-server did not restart:\n" + describe());
}

void PrivateRedis::pause() {
  if (process_ && process_->signal(SIGSTOP)) paused_ = true;
}

void PrivateRedis::resume() {
  if (process_ && paused_) process_->signal(SIGCONT);
  paused_ = false;
}

std::optional<int> PrivateRedis::wait_exit(std::chrono::milliseconds timeout) {
  return process_ ? process_->wait_exit(timeout) : std::nullopt;
}

std::string PrivateRedis::describe() { return process_ ? process_->describe(4096) : "redis-server: not running\n"; }

}  // namespace idem::test
