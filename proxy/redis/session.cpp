#include "redis/session.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <utility>

#include "log/log.hpp"

namespace idem::redis {
namespace {

// Failed attempts are logged on the first and then every this many, so a long outage leaves a
// trace without a line per attempt.
constexpr int kLogEveryFailures = 20;

}  // namespace

RedisSession::RedisSession(boost::asio::io_context& io, RedisSessionOptions options, StateHandler on_state)
    : io_(io),
      options_(std::move(options)),
      on_state_(std::move(on_state)),
      resolver_(io),
      timer_(io),
      jitter_(std::random_device{}()) {}

RedisSession::~RedisSession() {
  if (connection_) connection_->close();
}

void RedisSession::start() {
  if (started_ || stopped_) return;
  started_ = true;
  attempt();
}

void RedisSession::stop() {
  if (stopped_) return;
  stopped_ = true;
  ++generation_;
  timer_.cancel();
  resolver_.cancel();
  if (connection_) connection_->close();
  connection_.reset();
  set_ready(false);
}

void RedisSession::command(const std::vector<std::string>& argv, std::chrono::milliseconds answer_within,
                           std::chrono::milliseconds close_after, RedisConnection::ReplyHandler handler) {
  if (!ready_ || !connection_) {
    boost::asio::post(io_, [handler = std::move(handler)] {
      handler({RedisErrorKind::unavailable, "not connected"}, {});
    });
    return;
  }
  connection_->command(argv, answer_within, close_after, std::move(handler));
}

void RedisSession::attempt() {
  const std::uint64_t generation = ++generation_;
  boost::system::error_code not_an_address;
  const auto address = boost::asio::ip::make_address(options_.host, not_an_address);
  if (!not_an_address) {
    connect_to(address.to_string());
    return;
  }
  // A name: resolved by Asio (off the io thread), under the connect deadline.
  const std::weak_ptr<RedisSession> weak = weak_from_this();
  timer_.expires_after(options_.connect_timeout);
  timer_.async_wait([weak, generation](const boost::system::error_code& error) {
    const auto self = weak.lock();
    if (error || !self || generation != self->generation_) return;
    self->resolver_.cancel();
  });
  resolver_.async_resolve(options_.host, std::to_string(options_.port),
                          [weak, generation](const boost::system::error_code& error,
                                             const boost::asio::ip::tcp::resolver::results_type& results) {
                            const auto self = weak.lock();
                            if (!self || generation != self->generation_) return;
                            self->timer_.cancel();
                            if (error || results.empty()) {
                              self->on_attempt_failed("cannot resolve " + self->options_.host + ": " +
                                                      (error ? error.message() : std::string("no address")));
                              return;
                            }
                            self->connect_to(results.begin()->endpoint().address().to_string());
                          });
}

void RedisSession::connect_to(const std::string& address) {
  const std::uint64_t generation = generation_;
  const std::weak_ptr<RedisSession> weak = weak_from_this();
  connection_ = std::make_shared<RedisConnection>(io_, [weak, generation](const RedisError& why) {
    const auto self = weak.lock();
    if (self && generation == self->generation_) self->on_lost(why);
  });
  connection_->connect(address, options_.port, options_.connect_timeout, [weak, generation](const RedisError& error) {
    const auto self = weak.lock();
    if (!self || generation != self->generation_) return;
    if (!error.ok()) {
      self->on_attempt_failed(error.message);
      return;
    }
    self->set_up();
  });
}

void RedisSession::set_up() {
  // Pipelined: each reply must be a success; the last one (PING) says the server answers commands.
  std::vector<std::vector<std::string>> commands;
  if (!options_.password.empty()) commands.push_back({"AUTH", options_.password});
  if (options_.database != 0) commands.push_back({"SELECT", std::to_string(options_.database)});
  commands.push_back({"PING"});
  struct Progress {
    std::size_t remaining;
    std::string failure;
  };
  auto progress = std::make_shared<Progress>(Progress{commands.size(), {}});
  const std::uint64_t generation = generation_;
  const std::weak_ptr<RedisSession> weak = weak_from_this();
  for (auto& command : commands) {
    // Never logged: the AUTH argument is the password.
    std::string name = command.front();
    connection_->command(
        command, options_.connect_timeout,
        [weak, generation, progress, name = std::move(name)](const RedisError& error, const RedisReply& reply) {
          const auto self = weak.lock();
          if (!self || generation != self->generation_) return;
          if (progress->failure.empty()) {
            if (!error.ok()) {
              progress->failure = name + ": " + error.message;
            } else if (reply.is_error()) {
              progress->failure = name + " answered: " + reply.text;
            }
          }
          if (--progress->remaining > 0) return;
          if (!progress->failure.empty()) {
            self->on_attempt_failed("set-up failed: " + progress->failure);
            return;
          }
          self->on_ready();
        });
  }
}

void RedisSession::on_ready() {
  if (failed_attempts_ > 0) {
    log::info("redis_connected", {{"component", options_.component}, {"after_failed_attempts", failed_attempts_}});
  } else {
    log::info("redis_connected", {{"component", options_.component}});
  }
  failed_attempts_ = 0;
  set_ready(true);
}

void RedisSession::on_attempt_failed(const std::string& why) {
  ++failed_attempts_;
  if (failed_attempts_ == 1 || failed_attempts_ % kLogEveryFailures == 0) {
    log::warn("redis_connect_failed",
              {{"component", options_.component}, {"error", why}, {"attempt", failed_attempts_}});
  }
  retry_later();
}

void RedisSession::on_lost(const RedisError& why) {
  log::warn("redis_connection_lost",
            {{"component", options_.component}, {"error", why.message}, {"reason", redis_error_kind_name(why.kind)}});
  ++failed_attempts_;
  retry_later();
}

void RedisSession::retry_later() {
  set_ready(false);
  if (stopped_) return;
  ++generation_;  // callbacks of the failed connection are ignored from here on
  if (connection_) connection_->close();
  connection_.reset();
  timer_.expires_after(next_backoff());
  const std::weak_ptr<RedisSession> weak = weak_from_this();
  const std::uint64_t generation = generation_;
  timer_.async_wait([weak, generation](const boost::system::error_code& error) {
    const auto self = weak.lock();
    if (error || !self || self->stopped_ || generation != self->generation_) return;
    self->attempt();
  });
}

void RedisSession::set_ready(bool ready) {
  if (ready_ == ready) return;
  ready_ = ready;
  if (on_state_) on_state_(ready);
}

// "Equal jitter": a wait drawn from [d/2, d], d = min(max, min * 2^(failures-1)), so the workers
// and proxies that lost Redis together do not all come back in the same millisecond.
std::chrono::milliseconds RedisSession::next_backoff() {
  const std::int64_t floor = std::max<std::int64_t>(1, options_.min_backoff.count());
  const std::int64_t cap = std::max(floor, static_cast<std::int64_t>(options_.max_backoff.count()));
  std::int64_t ceiling = floor;
  for (int i = 1; i < failed_attempts_ && ceiling < cap; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, cap);
  std::uniform_int_distribution<std::int64_t> spread(ceiling / 2, ceiling);
  return std::chrono::milliseconds(std::max<std::int64_t>(1, spread(jitter_)));
}

}  // namespace idem::redis
