#pragma once
// What the Redis replay cache tests share: the suite's Redis (IDEMPROXY_TEST_REDIS_PORT, started by
// tests/run.sh), a private redis-server a test may stop, kill, pause (SIGSTOP) and restart, and a
// blocking client for looking at what the proxy wrote. Blocking I/O: test threads only.
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "redis/reply.hpp"
#include "support/process.hpp"

namespace idem::test::redis_env {

// IDEMPROXY_TEST_REDIS_PORT. Throws std::runtime_error when unset: the tests fail, never skip.
std::uint16_t suite_redis_port();

// A key prefix no other test (or earlier run) uses: "<label>-<12 hex digits>:".
std::string unique_prefix(std::string_view label);

// redis-server on a free loopback port, no persistence, logs in `dir`. Owned by the test: the
// only Redis a test may stop or pause. The destructor kills it (and resumes it first if paused).
class PrivateRedis {
 public:
  // `extra_args` are added to the command line, e.g. {"--requirepass", "secret"}.
  explicit PrivateRedis(std::filesystem::path dir, std::vector<std::string> extra_args = {});
  ~PrivateRedis();
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  std::uint16_t port() const { return port_; }
  void kill();     // SIGKILL: connections drop at once, the data is gone
  void restart();  // a fresh server on the same port (after kill())
  void pause();    // SIGSTOP: the socket stays open, nothing is answered
  void resume();   // SIGCONT
  std::string describe();

 private:
  void start();

  std::filesystem::path dir_;
  std::vector<std::string> extra_args_;
  std::uint16_t port_ = 0;
  int generation_ = 0;
  bool paused_ = false;
  std::optional<Process> process_;
};

class RedisClient {
 public:
  // Throws std::runtime_error when the server cannot be reached (or AUTH fails).
  explicit RedisClient(std::uint16_t port, const std::string& password = "");
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Throws std::runtime_error on a connection error; an error reply is returned as a reply.
  redis::RedisReply command(const std::vector<std::string>& argv);
  // Every key matching `pattern` (SCAN, so the server is not blocked), in no particular order.
  std::vector<std::string> keys(const std::string& pattern);

 private:
  redisContext* context_ = nullptr;
};

// Polls `condition` every `step` until it holds or `timeout` passes; its last value.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds(20));

}  // namespace idem::test::redis_env
