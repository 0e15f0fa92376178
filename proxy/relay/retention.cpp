#include "relay/retention.hpp"

#include <utility>

#include "log/log.hpp"

namespace idem::relay {

Retention::Retention(boost::asio::io_context& io, std::shared_ptr<OutboxSource> source, RetentionOptions options,
                     RelayStats& stats)
    : source_(std::move(source)), options_(options), stats_(stats), timer_(io) {}

void Retention::start() {
  if (options_.max_age.count() > 0) schedule();
}

void Retention::stop() {
  stopped_ = true;
  timer_.cancel();
}

void Retention::schedule() {
  if (stopped_) return;
  timer_.expires_after(options_.interval);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error || self->stopped_) return;
    self->round(0, 0);
  });
}

void Retention::round(std::size_t deleted_so_far, std::size_t statements) {
  source_->delete_published(
      options_.max_age, options_.batch,
      [self = shared_from_this(), deleted_so_far, statements](const pg::PgError& error, std::size_t deleted) {
        if (!error.ok()) {
          if (!self->stopped_) log::warn("retention_failed", {{"error", error.message}});
          self->schedule();
          return;
        }
        self->stats_.retention_deleted.fetch_add(deleted, std::memory_order_relaxed);
        const std::size_t total = deleted_so_far + deleted;
        if (deleted >= self->options_.batch && !self->stopped_) {
          self->round(total, statements + 1);
          return;
        }
        if (total > 0) log::info("retention_deleted", {{"rows", total}, {"statements", statements + 1}});
        self->schedule();
      });
}

}  // namespace idem::relay
