#pragma once
// One hiredis 0.14 asynchronous connection driven by an io_context.
//
// hiredis asks its event loop to start and stop watching the socket (addRead/delRead/addWrite/
// delWrite) and to forget it (cleanup); here those hooks arm one-shot Asio waits on a
// stream_descriptor that only watches the socket: hiredis owns the fd, so the descriptor is always
// release()d, never closed. hiredis 0.14 has no timer hook, so deadlines are Asio steady_timers:
// one for the connect, one for the earliest pending command. A deadline that passes closes the
// connection (the effect of the commands in flight is then unknown) and fails them with `timeout`.
// A command may instead be given two deadlines (a cache lookup that must not wait, on a connection
// worth keeping): its handler gets `timeout` at the first, the connection stays up and its late
// reply is read and dropped; only if the reply is still missing at the second is the connection
// closed as above.
//
// Lifecycle: fresh -> connecting -> connected -> closed, for good (reconnecting is the caller's
// policy: make a new RedisConnection). Commands are pipelined: any number may be in flight, and
// their replies come back in the order they were sent.
//
// Threading: construct, use and destroy on the thread running `io`. Create with make_shared: async
// steps hold a shared_ptr, so the object outlives its owner until the last step has run.
// Handlers run exactly once, always posted (never inside connect()/command()/close() nor inside a
// hiredis callback), so a handler may call any method, including close().
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redis/error.hpp"
#include "redis/reply.hpp"

struct redisAsyncContext;

namespace idem::redis {

class RedisConnection : public std::enable_shared_from_this<RedisConnection> {
 public:
  using ConnectHandler = std::function<void(RedisError)>;
  // `reply` is meaningful only when `error.ok()`; it may be an error reply (see error.hpp).
  using ReplyHandler = std::function<void(RedisError error, RedisReply reply)>;
  // The connection ended without close() being called: server gone, I/O error, or a deadline.
  using LostHandler = std::function<void(RedisError why)>;

  RedisConnection(boost::asio::io_context& io, LostHandler on_lost);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // fresh -> connecting -> connected (ok) or closed (error). `host` should be an address: a name
  // is resolved by hiredis, synchronously.
  void connect(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout, ConnectHandler handler);
  // Sends one command (binary-safe arguments). Only while connected; otherwise the handler gets
  // `unavailable` (posted).
  void command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, ReplyHandler handler);
  // As above, but a reply missing after `answer_within` answers the handler with `timeout` and
  // keeps the connection (the late reply is dropped); it is closed only when the reply is still
  // missing after `close_after` (taken as at least `answer_within`).
  void command(const std::vector<std::string>& argv, std::chrono::milliseconds answer_within,
               std::chrono::milliseconds close_after, ReplyHandler handler);
  // Any state -> closed. Commands in flight complete with `unavailable`; no LostHandler call.
  void close();

  bool connected() const { return state_ == State::connected; }
  std::size_t in_flight() const { return pending_.size(); }
  // Some command was answered `timeout` and its reply has not come back yet: the server is slow
  // or stuck, and anything sent now waits behind it.
  bool overdue() const { return overdue_ > 0; }

 private:
  enum class State { fresh, connecting, connected, closed };
  using Clock = std::chrono::steady_clock;
  struct Pending {
    ReplyHandler handler;         // empty once answered with `timeout`: the reply is then dropped
    Clock::time_point answer_by;  // the handler gets `timeout` here
    Clock::time_point close_by;   // the connection is closed here if the reply is still missing
  };

  // hiredis hooks and callbacks (ac->ev.data and ac->data point at this object).
  static void hook_add_read(void* self);
  static void hook_del_read(void* self);
  static void hook_add_write(void* self);
  static void hook_del_write(void* self);
  static void hook_cleanup(void* self);
  static void on_connect_callback(const redisAsyncContext* context, int status);
  static void on_disconnect_callback(const redisAsyncContext* context, int status);
  static void on_reply_callback(redisAsyncContext* context, void* reply, void* privdata);

  void arm_read();
  void arm_write();
  void on_connected(bool ok, std::string message);
  void on_context_gone();  // cleanup hook: the context is being freed
  void on_reply(const void* reply);
  void arm_deadline(Clock::time_point when);
  void on_deadline();
  // Frees the context (failing what is pending with `kind`), state -> closed.
  void shut(RedisErrorKind kind, std::string message, bool report_lost);
  void fail_pending(RedisErrorKind kind, const std::string& message);

  boost::asio::io_context& io_;
  LostHandler on_lost_;
  redisAsyncContext* context_ = nullptr;  // owned; freed through redisAsyncFree or by hiredis on error
  boost::asio::posix::stream_descriptor socket_;
  boost::asio::steady_timer deadline_;
  Clock::time_point armed_deadline_ = Clock::time_point::max();
  State state_ = State::fresh;
  bool want_read_ = false;
  bool want_write_ = false;
  bool read_wait_armed_ = false;
  bool write_wait_armed_ = false;
  // Bumped when the context goes away: socket waits of an older context do nothing.
  std::uint64_t generation_ = 0;
  ConnectHandler connect_handler_;
  std::deque<Pending> pending_;  // commands sent, oldest first (hiredis replies in this order)
  std::size_t overdue_ = 0;      // entries of pending_ already answered with `timeout`
  // Why the context is going away, for the replies hiredis fails while freeing it.
  RedisErrorKind closing_kind_ = RedisErrorKind::unavailable;
  std::string closing_message_ = "connection closed";
};

}  // namespace idem::redis
