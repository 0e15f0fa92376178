#include "relay/notify_listener.hpp"

#include <utility>

#include "log/log.hpp"
#include "pg/statement.hpp"
#include "relay/sql.hpp"

namespace idem::relay {

NotifyListener::NotifyListener(boost::asio::io_context& io, std::string dsn, std::chrono::milliseconds timeout,
                               std::function<void()> on_wake)
    : io_(io),
      dsn_(std::move(dsn)),
      timeout_(timeout),
      on_wake_(std::move(on_wake)),
      reconnect_timer_(io),
      backoff_(std::chrono::milliseconds(100), std::chrono::milliseconds(5'000)) {}

NotifyListener::~NotifyListener() {
  if (connection_) connection_->close();
}

void NotifyListener::start() {
  if (stopped_ || connection_) return;
  connect();
}

void NotifyListener::stop() {
  stopped_ = true;
  listening_ = false;
  ++generation_;
  reconnect_timer_.cancel();
  if (connection_) connection_->close();
  connection_.reset();
}

void NotifyListener::connect() {
  const std::uint64_t generation = ++generation_;
  const std::weak_ptr<NotifyListener> weak = weak_from_this();
  connection_ = std::make_shared<pg::Connection>(io_, [weak, generation] {
    const auto self = weak.lock();
    if (!self || generation != self->generation_) return;
    log::warn("notify_connection_lost");
    self->schedule_reconnect();
  });
  connection_->set_notification_handler(
      [weak, generation](const std::string& /*channel*/, const std::string& /*payload*/) {
        const auto self = weak.lock();
        if (self && generation == self->generation_ && self->on_wake_) self->on_wake_();
      });
  connection_->connect(dsn_, timeout_, [weak, generation](pg::PgError error) {
    const auto self = weak.lock();
    if (!self || generation != self->generation_) return;
    if (!error.ok()) {
      if (++self->failures_ == 1 || self->failures_ % 20 == 0) {
        log::warn("notify_connect_failed", {{"error", error.message}, {"attempt", self->failures_}});
      }
      self->schedule_reconnect();
      return;
    }
    auto listen = std::make_shared<pg::Statement>(pg::Statement{"listen", sql::kListen, {}});
    self->connection_->execute(std::move(listen), self->timeout_,
                               [weak, generation](pg::PgError error, pg::ResultHandle) {
                                 const auto self = weak.lock();
                                 if (!self || generation != self->generation_) return;
                                 if (!error.ok()) {
                                   ++self->failures_;
                                   log::warn("notify_listen_failed", {{"error", error.message}});
                                   self->schedule_reconnect();
                                   return;
                                 }
                                 self->failures_ = 0;
                                 self->listening_ = true;
                                 if (self->on_wake_) self->on_wake_();  // whatever was missed meanwhile
                               });
  });
}

void NotifyListener::schedule_reconnect() {
  listening_ = false;
  if (stopped_) return;
  ++generation_;
  if (connection_) connection_->close();
  connection_.reset();
  reconnect_timer_.expires_after(backoff_.delay(std::max(failures_, 1)));
  const std::weak_ptr<NotifyListener> weak = weak_from_this();
  reconnect_timer_.async_wait([weak](const boost::system::error_code& error) {
    if (error) return;
    if (const auto self = weak.lock(); self && !self->stopped_) self->connect();
  });
}

}  // namespace idem::relay
