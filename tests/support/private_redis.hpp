#pragma once
// A redis-server of the test's own, for the tests that stop, kill, pause (SIGSTOP) or restart
// Redis: the suite's server (redis_client.hpp) is shared and must stay up.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace idem::test {

// redis-server on a free loopback port, no save points, no AOF, its files and logs in `dir`. The
// destructor kills it (and resumes it first if paused).
class PrivateRedis {
 public:
  // `extra_args` are added to the command line, e.g. {"--requirepass", "secret"}. Throws
  // std::runtime_error (with the server's logs) when it does not start.
  explicit PrivateRedis(std::filesystem::path dir, std::vector<std::string> extra_args = {});
  ~PrivateRedis();
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  std::uint16_t port() const { return port_; }
  void kill();     // SIGKILL: connections drop at once, the data is gone
  // A fresh server on the same port and dir (after kill(), or after it exited); it loads the
  // dump.rdb a SHUTDOWN SAVE left there. Throws std::runtime_error when it does not start.
  void restart();
  void pause();    // SIGSTOP: the socket stays open, nothing is answered
  void resume();   // SIGCONT
  // Waits for the server to exit on its own (after a SHUTDOWN the test sent). Its exit status;
  // nullopt when it still runs at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
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

}  // namespace idem::test
