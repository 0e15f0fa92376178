#pragma once
// The relay loop: claim a batch of outbox rows, publish it to the sink, settle it (one statement),
// and go again at once while there is work; sleep on NOTIFY with a poll_interval fallback when
// there is none. `concurrency` workers run this loop side by side on one io thread, so the next
// batch is claimed while the previous one is being published; the claim's per-aggregate prefix
// rule (sql::kClaim) keeps each aggregate's rows in order across workers and across processes.
//
// Failures:
//  - a row the sink refuses: retried with capped exponential backoff and jitter (available_at),
//    parked after max_attempts (its aggregate's later rows wait behind it); what each delivery
//    outcome does to its row is relay/settle_decision.hpp;
//  - the sink unreachable or Postgres down: the batch is released (no attempt counted) and the
//    whole relay backs off (200 ms doubling to 10 s) before claiming again;
//  - a settle that fails is retried until the batch's lease is nearly over; after that the rows
//    are re-claimed when the lease lapses and re-published (the sink deduplicates).
// Lost replies (Postgres answered `reply_lost`: the statement went out, its answer never came):
//  - a claim: it may have leased rows to its token. The worker hands back whatever that token holds
//    (sql::kReleaseClaim, fenced by the token), once the claim has certainly ended on the server,
//    retrying until that succeeds or the lease would have lapsed anyway;
//  - a settle: retried like any failed settle. It may have committed, in which case the retry,
//    fenced by the token, updates nothing; while the lease holds nobody else can have taken the
//    rows, so that means the earlier settle applied (counted as such, not as a lost lease).
// A batch is published only while its lease has at least a sink timeout left (a relay resumed
// after SIGSTOP drops what it held instead of publishing late), and every settle is fenced by the
// batch token, so a batch whose lease was taken over changes nothing.
//
// Threading: everything on the io thread. stop() finishes or releases the batches in hand, then
// calls `on_stopped` (posted).
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "relay/backoff.hpp"
#include "relay/outbox_source.hpp"
#include "relay/sink.hpp"
#include "relay/stats.hpp"

namespace idem::relay {

struct RelayOptions {
  std::size_t batch_size = 100;
  unsigned concurrency = 2;
  std::chrono::milliseconds poll_interval{1'000};
  std::chrono::milliseconds lease{30'000};
  std::chrono::milliseconds publish_timeout{5'000};  // the sink's own deadline (for the lease check)
  std::chrono::milliseconds settle_reserve{10'000};  // lease kept back for the settle (2 x query timeout)
  // The source's deadline per statement; its sessions' statement_timeout is 90% of it. A statement
  // sent this long ago has ended on the server, committed or not.
  std::chrono::milliseconds query_timeout{5'000};
  unsigned max_attempts = 10;
  std::chrono::milliseconds backoff_initial{1'000};
  std::chrono::milliseconds backoff_max{300'000};
  std::chrono::milliseconds stats_interval{5'000};
};

class Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(boost::asio::io_context& io, RelayOptions options, std::shared_ptr<OutboxSource> source,
        std::shared_ptr<Sink> sink, RelayStats& stats);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  void start();
  // New rows may be there (a NOTIFY): an idle worker claims now.
  void wake();
  void stop(std::function<void()> on_stopped);

 private:
  using Clock = std::chrono::steady_clock;
  enum class WorkerState { idle, claiming, releasing_lost_claim, publishing, settling, done };
  struct Worker {
    WorkerState state = WorkerState::idle;
    std::unique_ptr<boost::asio::steady_timer> timer;  // the wait before a settle or release retry
  };
  struct Batch {
    std::size_t worker = 0;
    std::string token;
    Clock::time_point lease_end;  // local, conservative: measured from before the claim was sent
    std::shared_ptr<const std::vector<OutboxRow>> rows;
    std::vector<RowSettlement> settlements;
    int settle_failures = 0;
    bool settle_reply_lost = false;  // some settle attempt went out and got no answer: it may have applied
  };
  // A claim whose reply was lost: the rows it may have leased to `token` are handed back.
  struct LostClaim {
    std::size_t worker = 0;
    std::string token;
    Clock::time_point sent;       // just before the claim went out
    Clock::time_point lease_end;  // as for Batch
    int failures = 0;             // release attempts that failed
  };

  void wake_one();
  void claim(std::size_t worker);
  void on_claimed(std::size_t worker, std::string token, Clock::time_point lease_end, const pg::PgError& error,
                  std::vector<OutboxRow> rows);
  void publish(std::shared_ptr<Batch> batch);
  void on_published(std::shared_ptr<Batch> batch, std::vector<Delivery> deliveries);
  void release_all(std::shared_ptr<Batch> batch, std::string why);
  void settle(std::shared_ptr<Batch> batch);
  void on_settled(std::shared_ptr<Batch> batch, pg::PgError error, std::size_t updated);
  void count_settled(const Batch& batch);
  void release_lost_claim(std::shared_ptr<LostClaim> claim, Clock::time_point at);
  void on_lost_claim_released(std::shared_ptr<LostClaim> claim, const pg::PgError& error, std::size_t released);
  void worker_finished(std::size_t worker, bool more_work);
  void go_idle(std::size_t worker);
  void pause(std::string why);
  void recovered();  // an outage is over: logs it once and resets the outage backoff
  void arm_retry_wake(std::chrono::milliseconds delay);
  void poll_tick();
  void run_stats();
  void run_held_behind_parked();
  void schedule_stats();
  void check_stopped();

  boost::asio::io_context& io_;
  RelayOptions options_;
  std::shared_ptr<OutboxSource> source_;
  std::shared_ptr<Sink> sink_;
  RelayStats& stats_;
  std::string instance_;  // host-pid-random: the prefix of every batch token
  std::uint64_t batches_ = 0;
  std::vector<Worker> workers_;
  bool wake_pending_ = false;  // a wake arrived while every worker was busy
  bool started_ = false;
  bool stopping_ = false;
  std::function<void()> on_stopped_;
  // Outage backoff (sink unreachable, Postgres down): no claims until it ends.
  Backoff outage_backoff_;
  int outages_ = 0;
  bool paused_ = false;
  boost::asio::steady_timer pause_timer_;
  Backoff row_backoff_;
  boost::asio::steady_timer poll_timer_;
  boost::asio::steady_timer retry_timer_;
  Clock::time_point retry_at_ = Clock::time_point::max();
  boost::asio::steady_timer stats_timer_;
  std::int64_t last_parked_logged_ = 0;
};

}  // namespace idem::relay
