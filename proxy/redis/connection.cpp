#include "redis/connection.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <utility>

namespace idem::redis {
namespace {

RedisConnection* owner_of(const redisAsyncContext* context) { return static_cast<RedisConnection*>(context->data); }

std::string context_error(const redisAsyncContext* context, std::string_view fallback) {
  if (context != nullptr && context->err != 0 && context->errstr != nullptr) return context->errstr;
  return std::string(fallback);
}

}  // namespace

std::string_view redis_error_kind_name(RedisErrorKind kind) {
  switch (kind) {
    case RedisErrorKind::ok: return "ok";
    case RedisErrorKind::unavailable: return "unavailable";
    case RedisErrorKind::timeout: return "timeout";
    case RedisErrorKind::internal: return "internal";
  }
  return "internal";
}

RedisConnection::RedisConnection(boost::asio::io_context& io, LostHandler on_lost)
    : io_(io), on_lost_(std::move(on_lost)), socket_(io), deadline_(io) {}

// A destructor must not throw. The cleanup can only throw on allocation failure or an Asio
// cancel error, and the object is gone either way.
RedisConnection::~RedisConnection() {
  try {
    shut(RedisErrorKind::unavailable, "connection destroyed", false);
  } catch (...) {  // NOLINT(bugprone-empty-catch): see above
  }
}

void RedisConnection::connect(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                              ConnectHandler handler) {
  const auto refuse = [this](ConnectHandler handler, RedisErrorKind kind, std::string message) {
    boost::asio::post(io_, [handler = std::move(handler), kind, message = std::move(message)] {
      handler({kind, message});
    });
  };
  if (state_ != State::fresh) {
    refuse(std::move(handler), RedisErrorKind::internal, "connect called twice on one connection");
    return;
  }
  state_ = State::closed;  // until the context is set up
  redisAsyncContext* context = redisAsyncConnect(host.c_str(), port);
  if (context == nullptr) {
    refuse(std::move(handler), RedisErrorKind::internal, "out of memory creating a Redis context");
    return;
  }
  if (context->err != 0) {
    std::string message = context_error(context, "connect failed");
    redisAsyncFree(context);
    refuse(std::move(handler), RedisErrorKind::unavailable, std::move(message));
    return;
  }
  boost::system::error_code error;
  socket_.assign(context->c.fd, error);
  if (error) {
    redisAsyncFree(context);
    refuse(std::move(handler), RedisErrorKind::internal, "cannot watch the socket: " + error.message());
    return;
  }
  context_ = context;
  state_ = State::connecting;
  connect_handler_ = std::move(handler);
  context->data = this;
  context->ev.data = this;
  context->ev.addRead = &RedisConnection::hook_add_read;
  context->ev.delRead = &RedisConnection::hook_del_read;
  context->ev.addWrite = &RedisConnection::hook_add_write;
  context->ev.delWrite = &RedisConnection::hook_del_write;
  context->ev.cleanup = &RedisConnection::hook_cleanup;
  redisAsyncSetDisconnectCallback(context, &RedisConnection::on_disconnect_callback);
  // Registers for writability: the first write event tells that connect(2) finished.
  redisAsyncSetConnectCallback(context, &RedisConnection::on_connect_callback);
  arm_deadline(Clock::now() + timeout);
}

void RedisConnection::command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                              ReplyHandler handler) {
  command(argv, timeout, timeout, std::move(handler));
}

void RedisConnection::command(const std::vector<std::string>& argv, std::chrono::milliseconds answer_within,
                              std::chrono::milliseconds close_after, ReplyHandler handler) {
  const auto refuse = [this](ReplyHandler handler, RedisErrorKind kind, std::string message) {
    boost::asio::post(io_, [handler = std::move(handler), kind, message = std::move(message)] {
      handler({kind, message}, {});
    });
  };
  if (state_ != State::connected || context_ == nullptr) {
    refuse(std::move(handler), RedisErrorKind::unavailable, "not connected");
    return;
  }
  if (argv.empty()) {
    refuse(std::move(handler), RedisErrorKind::internal, "empty command");
    return;
  }
  std::vector<const char*> arguments;
  std::vector<std::size_t> lengths;
  arguments.reserve(argv.size());
  lengths.reserve(argv.size());
  for (const std::string& argument : argv) {
    arguments.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  // hiredis copies the arguments into its output buffer: argv may go away after this call.
  const int status = redisAsyncCommandArgv(context_, &RedisConnection::on_reply_callback, nullptr,
                                           static_cast<int>(arguments.size()), arguments.data(), lengths.data());
  if (status != REDIS_OK) {
    refuse(std::move(handler), RedisErrorKind::unavailable, context_error(context_, "command refused (disconnecting)"));
    return;
  }
  const Clock::time_point now = Clock::now();
  const Clock::time_point answer_by = now + answer_within;
  pending_.push_back({std::move(handler), answer_by, now + std::max(answer_within, close_after)});
  arm_deadline(answer_by);
}

void RedisConnection::close() { shut(RedisErrorKind::unavailable, "connection closed", false); }

// --- hiredis event hooks -------------------------------------------------------------------------

void RedisConnection::hook_add_read(void* self) {
  auto* connection = static_cast<RedisConnection*>(self);
  connection->want_read_ = true;
  connection->arm_read();
}

void RedisConnection::hook_del_read(void* self) { static_cast<RedisConnection*>(self)->want_read_ = false; }

void RedisConnection::hook_add_write(void* self) {
  auto* connection = static_cast<RedisConnection*>(self);
  connection->want_write_ = true;
  connection->arm_write();
}

void RedisConnection::hook_del_write(void* self) { static_cast<RedisConnection*>(self)->want_write_ = false; }

void RedisConnection::hook_cleanup(void* self) { static_cast<RedisConnection*>(self)->on_context_gone(); }

// Asio waits are one-shot where hiredis expects level-triggered watchers: a wait re-arms itself
// while hiredis still wants the event, and a wait that completes after a del* hook does nothing.
void RedisConnection::arm_read() {
  if (read_wait_armed_ || context_ == nullptr) return;
  read_wait_armed_ = true;
  socket_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                     [self = shared_from_this(), generation = generation_](const boost::system::error_code& error) {
                       if (generation != self->generation_) return;
                       self->read_wait_armed_ = false;
                       if (error || self->context_ == nullptr || !self->want_read_) return;
                       redisAsyncHandleRead(self->context_);  // may free the context (cleanup hook)
                       if (generation == self->generation_ && self->want_read_) self->arm_read();
                     });
}

void RedisConnection::arm_write() {
  if (write_wait_armed_ || context_ == nullptr) return;
  write_wait_armed_ = true;
  socket_.async_wait(boost::asio::posix::descriptor_base::wait_write,
                     [self = shared_from_this(), generation = generation_](const boost::system::error_code& error) {
                       if (generation != self->generation_) return;
                       self->write_wait_armed_ = false;
                       if (error || self->context_ == nullptr || !self->want_write_) return;
                       redisAsyncHandleWrite(self->context_);  // may free the context (cleanup hook)
                       if (generation == self->generation_ && self->want_write_) self->arm_write();
                     });
}

void RedisConnection::on_context_gone() {
  // Called by hiredis right before it closes the fd: stop watching it first.
  context_ = nullptr;
  ++generation_;
  want_read_ = want_write_ = false;
  read_wait_armed_ = write_wait_armed_ = false;
  if (socket_.is_open()) socket_.release();  // cancels our waits; the fd stays hiredis's
}

// --- hiredis callbacks ---------------------------------------------------------------------------

void RedisConnection::on_connect_callback(const redisAsyncContext* context, int status) {
  owner_of(context)->on_connected(status == REDIS_OK, context_error(context, "connect failed"));
}

void RedisConnection::on_connected(bool ok, std::string message) {
  if (state_ != State::connecting) return;
  ConnectHandler handler = std::move(connect_handler_);
  connect_handler_ = nullptr;
  RedisError error;
  if (ok) {
    state_ = State::connected;
    deadline_.cancel();
    armed_deadline_ = Clock::time_point::max();
  } else {
    // hiredis frees the context right after this callback returns.
    state_ = State::closed;
    deadline_.cancel();
    error = {RedisErrorKind::unavailable, std::move(message)};
  }
  if (handler) boost::asio::post(io_, [handler = std::move(handler), error = std::move(error)] { handler(error); });
}

void RedisConnection::on_disconnect_callback(const redisAsyncContext* context, int /*status*/) {
  RedisConnection* self = owner_of(context);
  if (self->state_ == State::closed) return;  // we asked for it (close(), a deadline)
  self->state_ = State::closed;
  self->deadline_.cancel();
  RedisError why{RedisErrorKind::unavailable, context_error(context, "connection closed by the server")};
  self->fail_pending(why.kind, why.message);
  if (self->on_lost_) {
    boost::asio::post(self->io_, [handler = self->on_lost_, why = std::move(why)] { handler(why); });
  }
}

void RedisConnection::on_reply_callback(redisAsyncContext* context, void* reply, void* /*privdata*/) {
  RedisConnection* self = owner_of(context);
  // A NULL reply: hiredis is failing what is pending because the context is going away.
  if (reply == nullptr && self->state_ != State::closed) {
    self->closing_message_ = context_error(context, "connection lost");
  }
  self->on_reply(reply);
}

void RedisConnection::on_reply(const void* reply) {
  if (pending_.empty()) return;  // only our own commands are ever sent
  Pending pending = std::move(pending_.front());
  pending_.pop_front();
  if (!pending.handler) {
    --overdue_;  // answered with `timeout` already: the late reply is dropped unread
    return;
  }
  if (reply != nullptr) {
    boost::asio::post(
        io_, [handler = std::move(pending.handler),
              value = copy_reply(*static_cast<const redisReply*>(reply))]() mutable { handler({}, std::move(value)); });
  } else {
    boost::asio::post(io_, [handler = std::move(pending.handler), kind = closing_kind_, message = closing_message_] {
      handler({kind, message}, {});
    });
  }
}

// --- deadlines -----------------------------------------------------------------------------------

void RedisConnection::arm_deadline(Clock::time_point when) {
  if (when >= armed_deadline_) return;  // an earlier wake-up is armed; it re-arms for the rest
  armed_deadline_ = when;
  deadline_.expires_at(when);
  deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error) return;
    self->on_deadline();
  });
}

void RedisConnection::on_deadline() {
  armed_deadline_ = Clock::time_point::max();
  switch (state_) {
    case State::connecting: shut(RedisErrorKind::timeout, "connect timed out", false); return;
    case State::connected: {
      const Clock::time_point now = Clock::now();
      for (const Pending& pending : pending_) {
        if (pending.close_by <= now) {
          shut(RedisErrorKind::timeout, "command timed out", true);
          return;
        }
      }
      Clock::time_point next = Clock::time_point::max();
      for (Pending& pending : pending_) {
        if (pending.handler && pending.answer_by <= now) {
          // The connection stays: the reply, when it comes, is matched to this entry and dropped.
          boost::asio::post(io_, [handler = std::move(pending.handler)] {
            handler({RedisErrorKind::timeout, "no reply within the deadline"}, {});
          });
          pending.handler = nullptr;
          ++overdue_;
        }
        next = std::min(next, pending.handler ? pending.answer_by : pending.close_by);
      }
      if (next != Clock::time_point::max()) arm_deadline(next);
      return;
    }
    case State::fresh:
    case State::closed: return;
  }
}

void RedisConnection::shut(RedisErrorKind kind, std::string message, bool report_lost) {
  const State was = state_;
  if (was == State::closed || was == State::fresh) {
    state_ = State::closed;
    return;
  }
  state_ = State::closed;
  closing_kind_ = kind;
  closing_message_ = message;
  deadline_.cancel();
  armed_deadline_ = Clock::time_point::max();
  if (context_ != nullptr) {
    // Runs every pending reply callback with NULL (failing them with closing_kind_), then the
    // cleanup hook; we are never inside a hiredis callback here, so the free is immediate.
    redisAsyncFree(context_);
    context_ = nullptr;
  }
  fail_pending(kind, message);
  if (was == State::connecting && connect_handler_) {
    boost::asio::post(io_, [handler = std::move(connect_handler_), kind, message] { handler({kind, message}); });
    connect_handler_ = nullptr;
  }
  if (report_lost && on_lost_) {
    boost::asio::post(io_, [handler = on_lost_, kind, message = std::move(message)] { handler({kind, message}); });
  }
}

void RedisConnection::fail_pending(RedisErrorKind kind, const std::string& message) {
  while (!pending_.empty()) {
    if (pending_.front().handler) {
      boost::asio::post(io_, [handler = std::move(pending_.front().handler), kind, message] {
        handler({kind, message}, {});
      });
    }
    pending_.pop_front();
  }
  overdue_ = 0;
}

}  // namespace idem::redis
