#pragma once
// One Redis connection kept up for as long as its owner wants it, on one io_context.
//
// It resolves the host (asynchronously: hiredis would resolve a name synchronously, blocking the
// io thread), connects, and runs the set-up before any command goes through: AUTH when a password
// is configured, SELECT when the database is not 0, then PING, so that a server which accepts
// connections but does not answer (stopped, loading its dataset) does not count as up. Any failure
// or loss closes the connection and schedules the next attempt after a capped, jittered backoff.
//
// Commands go through only while the session is ready; otherwise they fail at once with
// `unavailable`, so a caller never waits for a connection to come back.
//
// Threading: as RedisConnection. Create with make_shared; construct, use and destroy on the thread
// running `io`. stop() ends it for good: no timer or socket wait is left, so io.run() can return.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "redis/connection.hpp"

namespace idem::redis {

struct RedisSessionOptions {
  std::string host;  // an address or a name
  std::uint16_t port = 6379;
  std::string password;                            // AUTH on connect when not empty
  unsigned database = 0;                           // SELECT on connect when not 0
  std::chrono::milliseconds connect_timeout{500};  // bounds the resolve, the connect and the set-up, each
  std::chrono::milliseconds min_backoff{100};      // first wait after a failure; doubles up to max_backoff
  std::chrono::milliseconds max_backoff{5'000};
  std::string component = "redis";  // the `component` field of this session's log lines
};

class RedisSession : public std::enable_shared_from_this<RedisSession> {
 public:
  // Called on the io thread each time the session becomes ready or stops being ready.
  using StateHandler = std::function<void(bool ready)>;

  RedisSession(boost::asio::io_context& io, RedisSessionOptions options, StateHandler on_state);
  ~RedisSession();
  RedisSession(const RedisSession&) = delete;
  RedisSession& operator=(const RedisSession&) = delete;

  void start();  // the first attempt; later ones follow by themselves
  void stop();   // for good: closes the connection (commands in flight fail), cancels every timer

  // Connected and set up: commands go through.
  bool ready() const { return ready_; }
  // Ready, but a command got no reply within its first deadline and that reply is still missing.
  bool overdue() const { return ready_ && connection_ && connection_->overdue(); }
  // Attempts that failed (or connections lost) since it was last ready: 0 while a first attempt is
  // still under way.
  int failed_attempts() const { return failed_attempts_; }

  // RedisConnection::command with two deadlines; `unavailable` (posted) unless ready.
  void command(const std::vector<std::string>& argv, std::chrono::milliseconds answer_within,
               std::chrono::milliseconds close_after, RedisConnection::ReplyHandler handler);

 private:
  void attempt();
  void connect_to(const std::string& address);
  void set_up();
  void on_ready();
  void on_attempt_failed(const std::string& why);
  void on_lost(const RedisError& why);
  void retry_later();
  void set_ready(bool ready);
  std::chrono::milliseconds next_backoff();

  boost::asio::io_context& io_;
  RedisSessionOptions options_;
  StateHandler on_state_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer timer_;  // the resolve deadline, then the wait before the next attempt
  std::shared_ptr<RedisConnection> connection_;
  bool started_ = false;
  bool stopped_ = false;
  bool ready_ = false;
  int failed_attempts_ = 0;  // in a row; reset once ready
  std::minstd_rand jitter_;
  // Bumped for every attempt and on stop(): callbacks of an older attempt do nothing.
  std::uint64_t generation_ = 0;
};

}  // namespace idem::redis
