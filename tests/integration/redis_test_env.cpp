#include "integration/redis_test_env.hpp"

#include <csignal>

#include <charconv>
#include <random>
#include <stdexcept>
#include <thread>

#include "support/env.hpp"
#include "support/ports.hpp"

namespace idem::test::redis_env {
namespace {

constexpr std::chrono::seconds kStartTimeout{10};
constexpr int kStartAttempts = 3;  // a free port may be taken before the server binds it

std::string random_hex(std::size_t digits) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < digits; ++i) out.push_back(kHex[random() % 16]);
  return out;
}

}  // namespace

std::uint16_t suite_redis_port() {
  const auto text = env_var("IDEMPROXY_TEST_REDIS_PORT");
  int port = 0;
  if (!text || std::from_chars(text->data(), text->data() + text->size(), port).ec != std::errc{} || port <= 0 ||
      port > 65'535) {
    throw std::runtime_error("IDEMPROXY_TEST_REDIS_PORT is not set: run these tests through tests/run.sh");
  }
  return static_cast<std::uint16_t>(port);
}

std::string unique_prefix(std::string_view label) { return std::string(label) + "-" + random_hex(12) + ":"; }

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

std::string PrivateRedis::describe() { return process_ ? process_->describe(4096) : "redis-server: not running\n"; }

RedisClient::RedisClient(std::uint16_t port, const std::string& password) {
  const timeval timeout{5, 0};
  context_ = redisConnectWithTimeout("127.0.0.1", port, timeout);
  if (context_ == nullptr || context_->err != 0) {
    const std::string error = context_ != nullptr ? context_->errstr : "out of memory";
    if (context_ != nullptr) redisFree(context_);
    context_ = nullptr;
    throw std::runtime_error("redis connect to port " + std::to_string(port) + ": " + error);
  }
  redisSetTimeout(context_, timeout);
  if (!password.empty()) {
    const redis::RedisReply reply = command({"AUTH", password});
    if (reply.is_error()) {
      redisFree(context_);
      context_ = nullptr;
      throw std::runtime_error("redis AUTH: " + reply.text);
    }
  }
}

RedisClient::~RedisClient() {
  if (context_ != nullptr) redisFree(context_);
}

redis::RedisReply RedisClient::command(const std::vector<std::string>& argv) {
  std::vector<const char*> arguments;
  std::vector<std::size_t> lengths;
  for (const auto& argument : argv) {
    arguments.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(arguments.size()), arguments.data(), lengths.data()));
  if (reply == nullptr) throw std::runtime_error("redis: " + std::string(context_->errstr));
  redis::RedisReply copy = redis::copy_reply(*reply);
  freeReplyObject(reply);
  return copy;
}

std::vector<std::string> RedisClient::keys(const std::string& pattern) {
  std::vector<std::string> found;
  std::string cursor = "0";
  // Bounded: a test database holds far fewer keys than this many pages.
  for (int page = 0; page < 10'000; ++page) {
    const redis::RedisReply reply = command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (reply.kind != redis::RedisReply::Kind::array || reply.elements.size() != 2) {
      throw std::runtime_error("SCAN answered " + redis::describe(reply));
    }
    cursor = reply.elements[0].text;
    for (const auto& key : reply.elements[1].elements) found.push_back(key.text);
    if (cursor == "0") break;
  }
  return found;
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(step);
  }
  return condition();
}

}  // namespace idem::test::redis_env
