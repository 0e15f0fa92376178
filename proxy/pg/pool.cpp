#include "pg/pool.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include "pg/counters.hpp"
#include "pg/log.hpp"

namespace idem::pg {
namespace {

constexpr std::chrono::milliseconds kMinBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{5'000};

}  // namespace

Pool::Pool(boost::asio::io_context& io, PoolOptions options)
    : io_(io),
      options_(std::move(options)),
      slots_(std::max<std::size_t>(options_.size, 1)),
      acquire_timer_(io),
      jitter_(std::random_device{}()) {
  for (Slot& slot : slots_) slot.reconnect_timer = std::make_unique<boost::asio::steady_timer>(io);
}

// A destructor must not throw. The cleanup can only throw on allocation failure or an Asio
// cancel error, and the object is gone either way.
Pool::~Pool() {
  try {
    stop();
  } catch (...) {  // NOLINT(bugprone-empty-catch): see above
  }
}

void Pool::start() {
  if (started_ || stopped_) return;
  started_ = true;
  for (std::size_t index = 0; index < slots_.size(); ++index) connect_slot(index);
}

void Pool::stop() {
  if (stopped_) return;
  stopped_ = true;
  acquire_timer_.cancel();
  for (Slot& slot : slots_) {
    ++slot.generation;
    slot.reconnect_timer->cancel();
    if (slot.connection) {
      slot.connection->close();  // a running statement completes `unavailable`
      slot.connection.reset();
    }
    slot.state = SlotState::down;
  }
  while (!waiters_.empty()) {
    fail_later(std::move(waiters_.front().handler), PgErrorKind::unavailable, "the store is stopped");
    waiters_.pop_front();
  }
}

bool Pool::connected() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const Slot& slot) { return slot.state == SlotState::idle || slot.state == SlotState::busy; });
}

void Pool::execute(std::shared_ptr<const Statement> statement, Connection::ExecuteHandler handler) {
  if (stopped_) {
    fail_later(std::move(handler), PgErrorKind::unavailable, "the store is stopped");
    return;
  }
  if (waiters_.empty()) {  // the usual case: straight to an idle connection, no queueing, no clock read
    const auto idle =
        std::find_if(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.state == SlotState::idle; });
    if (idle != slots_.end()) {
      run_on(static_cast<std::size_t>(idle - slots_.begin()), std::move(statement), std::move(handler));
      return;
    }
  }
  waiters_.push_back({std::move(statement), std::move(handler), Clock::now() + options_.acquire_timeout});
  serve_waiters();
  // Still queued: every connection is busy or down.
  if (!waiters_.empty()) pg_counters().acquire_waits.fetch_add(1, std::memory_order_relaxed);
  arm_acquire_timer();
}

void Pool::connect_slot(std::size_t index) {
  Slot& slot = slots_[index];
  const std::uint64_t generation = ++slot.generation;
  const std::weak_ptr<Pool> weak = weak_from_this();
  slot.state = SlotState::connecting;
  slot.connection = std::make_shared<Connection>(
      io_,
      [weak, index, generation] {
        if (const auto pool = weak.lock()) pool->on_lost(index, generation);
      },
      options_.prepared_statements ? StatementMode::prepared : StatementMode::unnamed);
  slot.connection->connect(options_.dsn, options_.connect_timeout, [weak, index, generation](const PgError& error) {
    if (const auto pool = weak.lock()) pool->on_connected(index, generation, error);
  });
}

void Pool::on_connected(std::size_t index, std::uint64_t generation, const PgError& error) {
  Slot& slot = slots_[index];
  if (stopped_ || generation != slot.generation) return;
  if (error.ok()) {
    pg_counters().connects_succeeded.fetch_add(1, std::memory_order_relaxed);
    if (slot.failed_connects > 0)
      log_event("connected again", "after " + std::to_string(slot.failed_connects) + " failed attempts");
    slot.failed_connects = 0;
    slot.state = SlotState::idle;
    serve_waiters();
    return;
  }
  pg_counters().connects_failed.fetch_add(1, std::memory_order_relaxed);
  ++slot.failed_connects;
  // A down server would otherwise log once per slot per backoff step: log the first failure and
  // then every 20th.
  if (slot.failed_connects == 1 || slot.failed_connects % 20 == 0) {
    log_event("connect failed (" + std::string(pg_error_kind_name(error.kind)) + ", attempt " +
                  std::to_string(slot.failed_connects) + ", retrying)",
              error.message);
  }
  slot.connection.reset();
  schedule_reconnect(index);
}

void Pool::on_lost(std::size_t index, std::uint64_t generation) {
  Slot& slot = slots_[index];
  if (stopped_ || generation != slot.generation) return;
  slot.connection.reset();
  schedule_reconnect(index);
}

void Pool::on_executed(std::size_t index, std::uint64_t generation, const PgError& error) {
  Slot& slot = slots_[index];
  if (stopped_ || generation != slot.generation) return;
  if (slot.connection && slot.connection->idle()) {
    slot.state = SlotState::idle;
    serve_waiters();
    return;
  }
  log_event("connection closed after " + std::string(pg_error_kind_name(error.kind)), error.message);
  slot.connection.reset();
  schedule_reconnect(index);
}

void Pool::schedule_reconnect(std::size_t index) {
  Slot& slot = slots_[index];
  slot.state = SlotState::backing_off;
  // Even a connection lost after a long healthy life waits the minimum: a server that accepts and
  // then drops every connection must not be hammered in a loop.
  slot.reconnect_timer->expires_after(backoff_delay(std::max(slot.failed_connects, 1)));
  const std::weak_ptr<Pool> weak = weak_from_this();
  slot.reconnect_timer->async_wait([weak, index, generation = slot.generation](const boost::system::error_code& error) {
    if (error) return;
    const auto pool = weak.lock();
    if (!pool || pool->stopped_ || generation != pool->slots_[index].generation) return;
    pool->connect_slot(index);
  });
}

std::chrono::milliseconds Pool::backoff_delay(int failed_connects) {
  const int doublings = std::min(failed_connects - 1, 6);  // 100 ms * 2^6 is past the cap already
  const std::chrono::milliseconds ceiling = std::min(kMaxBackoff, kMinBackoff * (1 << doublings));
  // "Equal jitter": half fixed, half random, so slots (and processes) spread their attempts.
  std::uniform_int_distribution<std::int64_t> spread(ceiling.count() / 2, ceiling.count());
  return std::max(kMinBackoff, std::chrono::milliseconds(spread(jitter_)));
}

void Pool::run_on(std::size_t index, std::shared_ptr<const Statement> statement, Connection::ExecuteHandler handler) {
  Slot& slot = slots_[index];
  slot.state = SlotState::busy;
  const std::weak_ptr<Pool> weak = weak_from_this();
  slot.connection->execute(
      std::move(statement), options_.query_timeout,
      [weak, index, generation = slot.generation, handler = std::move(handler)](PgError error, ResultHandle result) {
        // Return the connection first, so the handler may run its next statement.
        if (const auto pool = weak.lock()) pool->on_executed(index, generation, error);
        handler(std::move(error), std::move(result));
      });
}

void Pool::serve_waiters() {
  for (std::size_t index = 0; index < slots_.size() && !waiters_.empty(); ++index) {
    if (slots_[index].state != SlotState::idle) continue;
    Waiter waiter = std::move(waiters_.front());
    waiters_.pop_front();
    run_on(index, std::move(waiter.statement), std::move(waiter.handler));
  }
}

void Pool::arm_acquire_timer() {
  if (acquire_timer_armed_ || waiters_.empty()) return;
  acquire_timer_armed_ = true;
  acquire_timer_.expires_at(waiters_.front().deadline);
  const std::weak_ptr<Pool> weak = weak_from_this();
  acquire_timer_.async_wait([weak](const boost::system::error_code& error) {
    if (error) return;
    if (const auto pool = weak.lock()) pool->on_acquire_timer();
  });
}

void Pool::on_acquire_timer() {
  acquire_timer_armed_ = false;
  if (stopped_) return;
  const Clock::time_point now = Clock::now();
  while (!waiters_.empty() && waiters_.front().deadline <= now) {
    pg_counters().acquire_timeouts.fetch_add(1, std::memory_order_relaxed);
    // Connections up but all busy is a saturated server; none up is an absent one (callers may
    // treat the two differently: idemproxy's fail_open forwards only on the latter).
    if (connected()) {
      fail_later(std::move(waiters_.front().handler), PgErrorKind::busy, "no connection free within acquire_timeout");
    } else {
      fail_later(std::move(waiters_.front().handler), PgErrorKind::unavailable,
                 "no connection to the server within acquire_timeout");
    }
    waiters_.pop_front();
  }
  arm_acquire_timer();
}

void Pool::fail_later(Connection::ExecuteHandler handler, PgErrorKind kind, std::string message) {
  boost::asio::post(io_, [handler = std::move(handler), kind, message = std::move(message)]() mutable {
    handler(PgError{kind, {}, std::move(message)}, nullptr);
  });
}

}  // namespace idem::pg
