#pragma once
// A fixed number of Connections on one io_context, and the queue of statements waiting for one.
//
// start() connects every slot; a slot whose connection fails or is lost (or is closed after a
// statement timeout) reconnects on its own, forever, after a capped exponential backoff with
// jitter: 100 ms doubling to 5 s, reset by a successful connect. A statement runs on an idle
// connection at once, else waits in FIFO order up to acquire_timeout, then fails `busy` (some
// connection is up) or `unavailable` (none is).
//
// Used only on the io thread. Handlers run exactly once, never inside execute()/stop().
// Async steps hold weak references: the pool may be destroyed while statements run; their
// handlers still run (with the connection's outcome, or `unavailable` from stop()).
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "pg/connection.hpp"
#include "pg/pool_options.hpp"

namespace idem::pg {

class Pool : public std::enable_shared_from_this<Pool> {
 public:
  Pool(boost::asio::io_context& io, PoolOptions options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  void start();            // idempotent; does nothing after stop()
  void stop();             // closes every connection; pending and later statements fail `unavailable`
  bool connected() const;  // at least one connection is up

  void execute(std::shared_ptr<const Statement> statement, Connection::ExecuteHandler handler);

 private:
  using Clock = std::chrono::steady_clock;
  enum class SlotState { down, connecting, idle, busy, backing_off };
  struct Slot {
    SlotState state = SlotState::down;
    std::shared_ptr<Connection> connection;
    int failed_connects = 0;       // since the last success; sets the backoff
    std::uint64_t generation = 0;  // bumped per connection; callbacks of older ones are ignored
    std::unique_ptr<boost::asio::steady_timer> reconnect_timer;
  };
  struct Waiter {
    std::shared_ptr<const Statement> statement;
    Connection::ExecuteHandler handler;
    Clock::time_point deadline;
  };

  void connect_slot(std::size_t index);
  void on_connected(std::size_t index, std::uint64_t generation, const PgError& error);
  void on_lost(std::size_t index, std::uint64_t generation);
  void on_executed(std::size_t index, std::uint64_t generation, const PgError& error);
  void schedule_reconnect(std::size_t index);
  std::chrono::milliseconds backoff_delay(int failed_connects);
  void run_on(std::size_t index, std::shared_ptr<const Statement> statement, Connection::ExecuteHandler handler);
  void serve_waiters();
  void arm_acquire_timer();
  void on_acquire_timer();
  void fail_later(Connection::ExecuteHandler handler, PgErrorKind kind, std::string message);

  boost::asio::io_context& io_;
  PoolOptions options_;
  std::vector<Slot> slots_;
  std::deque<Waiter> waiters_;  // deadlines ascend: all waits have the same timeout
  boost::asio::steady_timer acquire_timer_;
  bool acquire_timer_armed_ = false;
  bool started_ = false;
  bool stopped_ = false;
  std::minstd_rand jitter_;
};

}  // namespace idem::pg
