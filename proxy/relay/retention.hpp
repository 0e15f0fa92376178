#pragma once
// The outbox's janitor: deletes published rows older than `max_age`, `batch` at a time, oldest
// first (sql::kDeletePublished), every `interval`. A full batch means more is due: the next goes
// at once, each its own short statement, so no transaction holds many row locks. Kept apart from
// the relay loop (as PgBouncer keeps its janitor apart from protocol code): it shares the outbox
// source's pool and nothing else. Several relays may run it at once: each statement skips rows
// another one holds (SKIP LOCKED).
//
// Threading: the io thread of the source. stop() ends it at its next step (a statement in flight
// completes, and nothing follows it); stop it before the source.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <memory>

#include "relay/outbox_source.hpp"
#include "relay/stats.hpp"

namespace idem::relay {

struct RetentionOptions {
  std::chrono::milliseconds max_age{0};  // 0: no retention
  std::size_t batch = 1'000;
  std::chrono::milliseconds interval{60'000};
};

class Retention : public std::enable_shared_from_this<Retention> {
 public:
  Retention(boost::asio::io_context& io, std::shared_ptr<OutboxSource> source, RetentionOptions options,
            RelayStats& stats);
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  void start();  // no-op when max_age is 0
  void stop();

 private:
  void schedule();
  void round(std::size_t deleted_so_far, std::size_t statements);

  std::shared_ptr<OutboxSource> source_;
  RetentionOptions options_;
  RelayStats& stats_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
};

}  // namespace idem::relay
