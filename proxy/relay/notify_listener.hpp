#pragma once
// A dedicated Postgres connection that LISTENs for the outbox trigger's NOTIFY and calls `on_wake`
// for each one (and once after every (re)connect, since notifications sent while it was away are
// lost). Reconnects forever with capped backoff (100 ms .. 5 s). Used on the io thread only.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "pg/connection.hpp"
#include "relay/backoff.hpp"

namespace idem::relay {

class NotifyListener : public std::enable_shared_from_this<NotifyListener> {
 public:
  NotifyListener(boost::asio::io_context& io, std::string dsn, std::chrono::milliseconds timeout,
                 std::function<void()> on_wake);
  ~NotifyListener();

  void start();
  void stop();
  bool listening() const { return listening_; }

 private:
  void connect();
  void schedule_reconnect();

  boost::asio::io_context& io_;
  std::string dsn_;
  std::chrono::milliseconds timeout_;
  std::function<void()> on_wake_;
  std::shared_ptr<pg::Connection> connection_;
  boost::asio::steady_timer reconnect_timer_;
  Backoff backoff_;
  int failures_ = 0;
  std::uint64_t generation_ = 0;
  bool listening_ = false;
  bool stopped_ = false;
};

}  // namespace idem::relay
