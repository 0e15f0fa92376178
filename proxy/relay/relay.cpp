#include "relay/relay.hpp"

#include <unistd.h>

#include <boost/asio/post.hpp>

#include <algorithm>
#include <random>
#include <utility>

#include "core/trace_context.hpp"
#include "log/log.hpp"
#include "relay/settle_decision.hpp"

namespace idem::relay {
namespace {

constexpr std::chrono::milliseconds kOutageMin{200};
constexpr std::chrono::milliseconds kOutageMax{10'000};
// How often a worker looks again while the sink makes its first connection.
constexpr std::chrono::milliseconds kFirstConnectPoll{20};

std::string make_instance_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  static constexpr char kDigits[] = "0123456789abcdef";
  std::mt19937_64 random(std::random_device{}());
  std::string id = std::string(host[0] != '\0' ? host : "relay") + "-" + std::to_string(getpid()) + "-";
  for (std::uint64_t bits = random(), i = 0; i < 8; ++i, bits >>= 4) id.push_back(kDigits[bits & 0xF]);
  return id;
}

std::int64_t count_ms(std::chrono::milliseconds value) { return value.count(); }

// Drops a row's malformed trace context (the event itself is still published: a writer's tracing
// bug must not hold events back) and counts it. tracestate means nothing without a traceparent.
void check_trace_context(OutboxRow& row, RelayStats& stats) {
  std::string_view why;
  if (!row.traceparent.empty() && !core::is_valid_traceparent(row.traceparent)) {
    why = "malformed traceparent";
    row.traceparent.clear();
    row.tracestate.clear();
  } else if (row.traceparent.empty() && !row.tracestate.empty()) {
    why = "tracestate without traceparent";
    row.tracestate.clear();
  } else if (!row.tracestate.empty() && !core::is_valid_tracestate(row.tracestate)) {
    why = "malformed tracestate";
    row.tracestate.clear();
  } else {
    return;
  }
  stats.trace_context_dropped.fetch_add(1, std::memory_order_relaxed);
  log::warn("trace_context_dropped", {{"event_id", row.id}, {"why", why}});
}

}  // namespace

Relay::Relay(boost::asio::io_context& io, RelayOptions options, std::shared_ptr<OutboxSource> source,
             std::shared_ptr<Sink> sink, RelayStats& stats)
    : io_(io),
      options_(options),
      source_(std::move(source)),
      sink_(std::move(sink)),
      stats_(stats),
      instance_(make_instance_id()),
      outage_backoff_(kOutageMin, kOutageMax),
      pause_timer_(io),
      row_backoff_(options_.backoff_initial, options_.backoff_max),
      poll_timer_(io),
      retry_timer_(io),
      stats_timer_(io) {
  workers_.resize(std::max(options_.concurrency, 1u));
  for (Worker& worker : workers_) worker.timer = std::make_unique<boost::asio::steady_timer>(io);
}

Relay::~Relay() = default;

void Relay::start() {
  if (started_) return;
  started_ = true;
  log::info("relay_started", {{"instance", instance_},
                              {"sink", std::string(sink_->name())},
                              {"batch_size", options_.batch_size},
                              {"concurrency", static_cast<unsigned>(workers_.size())},
                              {"lease_ms", count_ms(options_.lease)}});
  source_->start();
  sink_->start();
  poll_tick();
  run_stats();
}

void Relay::wake() { wake_one(); }

void Relay::wake_one() {
  if (stopping_ || paused_ || !started_) return;
  for (std::size_t worker = 0; worker < workers_.size(); ++worker) {
    if (workers_[worker].state == WorkerState::idle) {
      claim(worker);
      return;
    }
  }
  wake_pending_ = true;  // every worker is busy; the first to go idle claims again
}

void Relay::poll_tick() {
  poll_timer_.expires_after(options_.poll_interval);
  poll_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error || self->stopping_) return;
    self->wake_one();
    self->poll_tick();
  });
}

void Relay::claim(std::size_t worker) {
  if (!sink_->ready()) {
    go_idle(worker);
    if (sink_->connecting()) {
      arm_retry_wake(kFirstConnectPoll);
    } else {
      pause("sink not connected");
    }
    return;
  }
  workers_[worker].state = WorkerState::claiming;
  std::string token = instance_ + "-" + std::to_string(++batches_);
  const Clock::time_point lease_end = Clock::now() + options_.lease;
  source_->claim(options_.batch_size, token, options_.lease,
                 [self = shared_from_this(), worker, token, lease_end](const pg::PgError& error,
                                                                       std::vector<OutboxRow> rows) mutable {
                   self->on_claimed(worker, std::move(token), lease_end, error, std::move(rows));
                 });
}

void Relay::on_claimed(std::size_t worker, std::string token, Clock::time_point lease_end, const pg::PgError& error,
                       std::vector<OutboxRow> rows) {
  if (!error.ok()) {
    stats_.source_failures.fetch_add(1, std::memory_order_relaxed);
    pause("claim failed (" + std::string(pg::pg_error_kind_name(error.kind)) + "): " + error.message);
    if (error.kind != pg::PgErrorKind::reply_lost) {
      go_idle(worker);
      return;
    }
    // The claim may have committed: rows leased to `token` that nobody would touch before the
    // lease lapses (their aggregates blocked meanwhile). The token is known, so hand them back.
    // Not before the claim has certainly ended on the server (statement_timeout): a release that
    // overtook a claim still running would miss the rows that claim is about to lease.
    auto claim = std::make_shared<LostClaim>();
    claim->worker = worker;
    claim->token = std::move(token);
    claim->sent = lease_end - options_.lease;
    claim->lease_end = lease_end;
    log::warn("claim_reply_lost", {{"token", claim->token}, {"error", error.message}});
    workers_[worker].state = WorkerState::releasing_lost_claim;
    const Clock::time_point claim_ended = stopping_ ? Clock::now() : claim->sent + options_.query_timeout;
    release_lost_claim(std::move(claim), claim_ended);
    return;
  }
  stats_.source_connected.store(true, std::memory_order_relaxed);
  stats_.claims.fetch_add(1, std::memory_order_relaxed);
  stats_.rows_claimed.fetch_add(rows.size(), std::memory_order_relaxed);
  for (OutboxRow& row : rows) check_trace_context(row, stats_);
  if (rows.empty()) {
    recovered();  // Postgres answers and the sink was ready
    worker_finished(worker, false);
    return;
  }
  const bool full = rows.size() >= options_.batch_size;
  auto batch = std::make_shared<Batch>();
  batch->worker = worker;
  batch->token = std::move(token);
  batch->lease_end = lease_end;
  batch->rows = std::make_shared<const std::vector<OutboxRow>>(std::move(rows));
  if (stopping_) {
    release_all(batch, "shutting down");
    return;
  }
  if (full) wake_one();  // more work is likely: another worker claims while this one publishes
  publish(std::move(batch));
}

void Relay::release_lost_claim(std::shared_ptr<LostClaim> claim, Clock::time_point at) {
  boost::asio::steady_timer& timer = *workers_[claim->worker].timer;
  timer.expires_at(at);
  // Only stop() cancels the wait (operation_aborted): a relay shutting down then tries at once
  // rather than leave the rows leased behind it. Either way the release goes out.
  timer.async_wait([self = shared_from_this(), claim](const boost::system::error_code&) mutable {
    const std::string token = claim->token;
    self->source_->release_claim(
        token, [self, claim = std::move(claim)](const pg::PgError& error, std::size_t released) mutable {
          self->on_lost_claim_released(std::move(claim), error, released);
        });
  });
}

void Relay::on_lost_claim_released(std::shared_ptr<LostClaim> claim, const pg::PgError& error, std::size_t released) {
  const std::size_t worker = claim->worker;
  if (error.ok()) {
    stats_.released.fetch_add(released, std::memory_order_relaxed);
    // 0 rows: the claim never committed (or leased nothing).
    log::info("lost_claim_released", {{"token", claim->token}, {"rows", released}});
    worker_finished(worker, false);
    return;
  }
  stats_.source_failures.fetch_add(1, std::memory_order_relaxed);
  ++claim->failures;
  const std::chrono::milliseconds delay = outage_backoff_.delay(claim->failures);
  // Past the lease the rows are claimable again anyway (and the release, fenced by the token,
  // would change nothing another claim holds).
  if (!stopping_ && Clock::now() + delay < claim->lease_end) {
    release_lost_claim(std::move(claim), Clock::now() + delay);
    return;
  }
  log::warn("lost_claim_release_failed",
            {{"token", claim->token}, {"attempts", claim->failures}, {"error", error.message}});
  worker_finished(worker, false);
}

void Relay::publish(std::shared_ptr<Batch> batch) {
  if (Clock::now() + options_.publish_timeout >= batch->lease_end) {
    // Paused (SIGSTOP, a long GC-like stall) with the batch in hand: another relay may own these
    // rows by now. Publishing late could overtake that relay's publishes of the same aggregate.
    log::warn("lease_nearly_over", {{"token", batch->token}, {"rows", batch->rows->size()}});
    release_all(std::move(batch), "lease nearly over");
    return;
  }
  workers_[batch->worker].state = WorkerState::publishing;
  sink_->publish(batch->rows, batch->lease_end - options_.settle_reserve,
                 [self = shared_from_this(), batch](std::vector<Delivery> deliveries) mutable {
                   self->on_published(std::move(batch), std::move(deliveries));
                 });
}

void Relay::on_published(std::shared_ptr<Batch> batch, std::vector<Delivery> deliveries) {
  const std::vector<OutboxRow>& rows = *batch->rows;
  bool any_through = false;
  std::string unavailable;
  std::chrono::milliseconds earliest_retry = std::chrono::milliseconds::max();
  batch->settlements.clear();
  batch->settlements.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const OutboxRow& row = rows[i];
    Delivery& delivery = deliveries[i];
    const SettleDecision decision = decide_settlement(delivery.outcome, row.attempts, options_.max_attempts);
    RowSettlement settlement{.id = row.id, .lane = row.lane, .outcome = decision.settlement, .delay = {}, .error = {}};
    switch (decision.reason) {
      case SettleReason::duplicate: stats_.duplicates.fetch_add(1, std::memory_order_relaxed); [[fallthrough]];
      case SettleReason::delivered: any_through = true; break;
      case SettleReason::failed:
        settlement.delay = row_backoff_.delay(decision.attempts);
        settlement.error = std::move(delivery.error);
        earliest_retry = std::min(earliest_retry, settlement.delay);
        log::warn("publish_failed", {{"event_id", row.id},
                                     {"aggregate_id", row.aggregate_id},
                                     {"attempts", decision.attempts},
                                     {"retry_in_ms", count_ms(settlement.delay)},
                                     {"error", settlement.error}});
        break;
      case SettleReason::out_of_attempts:
      case SettleReason::refused:
        settlement.error = std::move(delivery.error);
        log::error("row_parked", {{"event_id", row.id},
                                  {"aggregate_type", row.aggregate_type},
                                  {"aggregate_id", row.aggregate_id},
                                  {"reason", settle_reason_name(decision.reason)},
                                  {"attempts", decision.attempts},
                                  {"error", settlement.error}});
        break;
      case SettleReason::held: break;
      case SettleReason::sink_unavailable:
        if (unavailable.empty()) unavailable = delivery.error;
        break;
    }
    batch->settlements.push_back(std::move(settlement));
  }
  if (!unavailable.empty()) {
    stats_.sink_unavailable.fetch_add(1, std::memory_order_relaxed);
    pause("sink unavailable: " + unavailable);
  } else if (any_through) {
    recovered();
  }
  if (earliest_retry != std::chrono::milliseconds::max()) arm_retry_wake(earliest_retry);
  settle(std::move(batch));
}

void Relay::release_all(std::shared_ptr<Batch> batch, std::string why) {
  batch->settlements.clear();
  for (const OutboxRow& row : *batch->rows) {
    batch->settlements.push_back(
        {.id = row.id, .lane = row.lane, .outcome = Settlement::released, .delay = {}, .error = {}});
  }
  log::info("releasing_batch", {{"token", batch->token}, {"rows", batch->rows->size()}, {"why", why}});
  settle(std::move(batch));
}

void Relay::settle(std::shared_ptr<Batch> batch) {
  workers_[batch->worker].state = WorkerState::settling;
  source_->settle(batch->token, batch->settlements,
                  [self = shared_from_this(), batch](pg::PgError error, std::size_t updated) mutable {
                    self->on_settled(std::move(batch), std::move(error), updated);
                  });
}

void Relay::on_settled(std::shared_ptr<Batch> batch, pg::PgError error, std::size_t updated) {
  const std::size_t worker = batch->worker;
  if (!error.ok()) {
    stats_.source_failures.fetch_add(1, std::memory_order_relaxed);
    ++batch->settle_failures;
    if (error.kind == pg::PgErrorKind::reply_lost) batch->settle_reply_lost = true;
    const std::chrono::milliseconds delay = outage_backoff_.delay(batch->settle_failures);
    if (!stopping_ && Clock::now() + delay + options_.publish_timeout < batch->lease_end) {
      log::warn("settle_failed", {{"token", batch->token},
                                  {"attempt", batch->settle_failures},
                                  {"retry_in_ms", count_ms(delay)},
                                  {"error", error.message}});
      boost::asio::steady_timer& timer = *workers_[worker].timer;
      timer.expires_after(delay);
      timer.async_wait([self = shared_from_this(), batch](const boost::system::error_code& wait_error) mutable {
        if (wait_error || self->stopping_) {
          self->worker_finished(batch->worker, false);
          return;
        }
        self->settle(std::move(batch));
      });
      return;
    }
    // The rows are re-claimed when their lease lapses and published again (the sink
    // deduplicates). When some attempt's reply was lost, that attempt may have applied: then
    // nothing is wrong at all, so not an error.
    log::write(batch->settle_reply_lost ? log::Level::warn : log::Level::error, "settle_given_up",
               {{"token", batch->token},
                {"rows", batch->rows->size()},
                {"applied", batch->settle_reply_lost ? "unknown" : "no"},
                {"error", error.message}});
    pause("settle failed");
    worker_finished(worker, false);
    return;
  }
  if (updated == 0 && batch->settle_reply_lost && Clock::now() < batch->lease_end) {
    // The settle is one statement: all of the batch or nothing. A retry that finds none of the
    // rows still held by the token, while the lease still holds (lease_end is conservative, and
    // this answer was computed before it arrived), means no other claim can have taken them: the
    // attempt whose reply was lost committed.
    log::info("lost_settle_applied", {{"token", batch->token}, {"rows", batch->settlements.size()}});
    count_settled(*batch);
  } else if (updated < batch->settlements.size()) {
    const std::size_t lost = batch->settlements.size() - updated;
    stats_.lease_lost.fetch_add(lost, std::memory_order_relaxed);
    // Another claim owns these rows now: the settle changed nothing for them.
    log::warn("lease_lost", {{"token", batch->token}, {"rows", lost}});
  } else {
    count_settled(*batch);
  }
  worker_finished(worker, true);
}

void Relay::count_settled(const Batch& batch) {
  for (const RowSettlement& settlement : batch.settlements) {
    switch (settlement.outcome) {
      case Settlement::published: stats_.published.fetch_add(1, std::memory_order_relaxed); break;
      case Settlement::retry: stats_.publish_failures.fetch_add(1, std::memory_order_relaxed); break;
      case Settlement::parked: stats_.parked.fetch_add(1, std::memory_order_relaxed); break;
      case Settlement::released: stats_.released.fetch_add(1, std::memory_order_relaxed); break;
    }
  }
}

void Relay::worker_finished(std::size_t worker, bool more_work) {
  if (stopping_) {
    workers_[worker].state = WorkerState::done;
    check_stopped();
    return;
  }
  if (more_work && !paused_) {
    claim(worker);  // no sleep while there is work
    return;
  }
  go_idle(worker);
}

void Relay::go_idle(std::size_t worker) {
  if (stopping_) {
    workers_[worker].state = WorkerState::done;
    check_stopped();
    return;
  }
  workers_[worker].state = WorkerState::idle;
  if (wake_pending_ && !paused_) {
    wake_pending_ = false;
    claim(worker);
  }
}

void Relay::pause(std::string why) {
  if (paused_ || stopping_) return;
  ++outages_;
  paused_ = true;
  const std::chrono::milliseconds delay = outage_backoff_.delay(outages_);
  if (outages_ == 1 || outages_ % 10 == 0) {
    log::warn("backing_off", {{"why", why}, {"consecutive", outages_}, {"delay_ms", count_ms(delay)}});
  }
  pause_timer_.expires_after(delay);
  pause_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error) return;
    self->paused_ = false;
    self->wake_one();
  });
}

void Relay::recovered() {
  // Both ends answered just now: /readyz says so at once, not at the next stats run.
  stats_.sink_ready.store(true, std::memory_order_relaxed);
  stats_.source_connected.store(true, std::memory_order_relaxed);
  if (outages_ == 0) return;
  log::info("relay_recovered", {{"after_outages", outages_}});
  outages_ = 0;
}

void Relay::arm_retry_wake(std::chrono::milliseconds delay) {
  const Clock::time_point at = Clock::now() + delay;
  if (at >= retry_at_) return;
  retry_at_ = at;
  retry_timer_.expires_at(at);
  retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
    if (error) return;
    self->retry_at_ = Clock::time_point::max();
    self->wake_one();
  });
}

void Relay::run_stats() {
  source_->backlog([self = shared_from_this()](const pg::PgError& error, Backlog backlog) {
    RelayStats& stats = self->stats_;
    stats.sink_ready.store(self->sink_->ready(), std::memory_order_relaxed);
    stats.source_connected.store(self->source_->connected(), std::memory_order_relaxed);
    if (error.ok()) {
      stats.backlog_waiting.store(backlog.waiting, std::memory_order_relaxed);
      stats.backlog_parked.store(backlog.parked, std::memory_order_relaxed);
      stats.oldest_waiting_age_ms.store(backlog.oldest_age_ms, std::memory_order_relaxed);
      stats.backlog_known.store(true, std::memory_order_relaxed);
      if (backlog.parked != self->last_parked_logged_) {
        self->last_parked_logged_ = backlog.parked;
        // Listed by idemrelay --list-parked; redriven with --redrive ID, --redrive --aggregate T/ID, --redrive-all.
        log::write(backlog.parked > 0 ? log::Level::warn : log::Level::info, "parked_rows",
                   {{"parked", backlog.parked}});
      }
      if (backlog.parked > 0) {
        self->run_held_behind_parked();
        return;
      }
      stats.held_behind_parked.store(0, std::memory_order_relaxed);
    }
    self->schedule_stats();
  });
}

// Only while rows are parked: how many waiting rows they hold back (idemrelay_held_behind_parked_rows).
void Relay::run_held_behind_parked() {
  source_->held_behind_parked([self = shared_from_this()](const pg::PgError& error, std::int64_t rows) {
    if (error.ok()) self->stats_.held_behind_parked.store(rows, std::memory_order_relaxed);
    self->schedule_stats();
  });
}

void Relay::schedule_stats() {
  if (stopping_) return;
  stats_timer_.expires_after(options_.stats_interval);
  stats_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& wait_error) {
    if (wait_error || self->stopping_) return;
    self->run_stats();
  });
}

void Relay::stop(std::function<void()> on_stopped) {
  if (stopping_) return;
  stopping_ = true;
  on_stopped_ = std::move(on_stopped);
  poll_timer_.cancel();
  pause_timer_.cancel();
  retry_timer_.cancel();
  stats_timer_.cancel();
  for (Worker& worker : workers_) {
    if (worker.state == WorkerState::idle) worker.state = WorkerState::done;
    // A waiting settle retry gives up; a waiting release of a lost claim is sent at once.
    if (worker.state == WorkerState::settling || worker.state == WorkerState::releasing_lost_claim)
      worker.timer->cancel();
  }
  check_stopped();
}

void Relay::check_stopped() {
  if (!stopping_ || !on_stopped_) return;
  if (!std::all_of(workers_.begin(), workers_.end(),
                   [](const Worker& worker) { return worker.state == WorkerState::done; }))
    return;
  sink_->stop();
  source_->stop();
  boost::asio::post(io_, std::move(on_stopped_));
  on_stopped_ = nullptr;
}

}  // namespace idem::relay
