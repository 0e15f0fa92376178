// Model check of the timing rules (README "Timing"): many small, randomized timelines of one key,
// each a few client retries through exchanges that follow the core decisions (decide,
// after_claim_failure, after_upstream_failure, after_owner_write, owner_write_horizon) against the
// memory store on a clock the test moves. Every delay an exchange can meet is drawn up to the
// timeout that bounds it, boundaries included: the claim's INSERT and its reply, the TCP and TLS
// connect, the upstream (slower than its timeout too), the completion's acquire and statement.
// On top: lost replies, background owner-write retries, a proxy crash at any moment, an operator
// release, a reload that changes the route, the reaper, events at the same millisecond in any
// order.
//
// And claims that land after their proxy gave up on them (store README "Fences"). A claim whose
// reply is lost (503 at sent + query_timeout, then a release in the background) may:
//   - commit late: its statement is evaluated when it runs (against what is visible then, lease
//     and expiry counted from then; MemoryStore::claim_visible_later) and its record becomes
//     visible at any moment after the proxy gave up: before or after its owner's release landed,
//     after its lease lapsed (a commit waiting for a synchronous standby). Until then its row is
//     invisible, so the owner's release finds nothing and fences. What Postgres makes wait on the
//     row waits until the commit, then runs, in a random order: the key's other claims, and the
//     writes and the operator release of the record it replaces; the reaper's sweep after them.
//     A claim that waited runs with now() at its start, as in Postgres, against the committed row
//     and the fences there are then: more than its snapshot saw, so it takes over (or, its own
//     owner fenced, inserts nothing) where Postgres's first run might find no row (the store runs
//     it again, if its proxy still waits) or insert a fenced record. Its reply counts if it comes
//     before its proxy's deadline; past that, the server cancels it (statement_timeout) or runs it
//     anyway (that setting does not reach the server through every pooler): both are drawn. A late
//     claim that writes nothing is not modelled as holding its row lock: it changes no record, it
//     only delays statements, as any slow commit does.
//   - run late as a whole (queued in a pooler), at any moment after its proxy gave up, after its
//     release's fence too, until that fence expires (see draw_late_claim); or never run.
//
// What must hold, for every pair of executions (the upstream started) of the key, the earlier
// e1 and the later e2:
//   1. e2 never claims the key while e1's exchange may still be under way (from its claim until
//      its settling write ran, its proxy gave up on the upstream, or it crashed). In any mode.
//   2. e2 never starts within e1's lease, nor within e1's ttl when e1 completed, nor within
//      ttl + unknown_retention when e1's outcome is unknown (it timed out or its proxy died),
//      unless an operator released the record in between, or (unknown outcome only) the route
//      says unknown_outcome: retry, as e1 claimed it or as a reload made it for e2.
// And no key is locked by a request that never ran:
//   3. once an owner's release has landed (answered ok or not_owner: Store::release), no claim is
//      answered with that owner's record, whenever its claim commits;
//   4. at the end (every commit landed, every background write done or given up), a fresh claim
//      takes the key, or finds the record of a request that started upstream, or of one whose
//      proxy died, or never reached the store before its owner-write horizon, before releasing it.
// The configurations are drawn so that they pass the timing model (core/exchange_timing.hpp);
// sabotaged ones (Sabotage) must be caught.
//
// IDEMPROXY_MODEL_SEED and IDEMPROXY_MODEL_TIMELINES override the seed and the count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/decision.hpp"
#include "core/exchange_timing.hpp"
#include "core/failure_policy.hpp"
#include "store/memory_store.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;
using core::StoreError;

class SimulatedClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override { return origin_ + now_; }
  milliseconds elapsed() const { return now_; }
  void set(milliseconds at) { now_ = at; }

 private:
  const std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  milliseconds now_{0};
};

// What a broken configuration or store would do, to prove the checker catches it.
struct Sabotage {
  bool lease_below_longest_exchange = false;  // draw leases under the model's minimum
  bool forget_unsettled_retention = false;    // claims keep an unsettled in-flight record only ttl long
  bool release_trusts_zero_rows = false;      // a release that deletes nothing writes no fence
};

// One drawn configuration: the timeouts in force and the route before and after a reload.
struct Setting {
  core::ExchangeTimeouts timeouts;
  core::RoutePolicy before;
  core::RoutePolicy after;  // for claims sent after reload_at
  milliseconds reload_at{0};
};

struct Execution {
  int attempt = 0;
  milliseconds claimed_at{0};    // when the store ran the claim that won the key
  milliseconds started_at{0};    // request written to the upstream
  milliseconds exchange_end{0};  // its settling write ran (or was given up), the lease left to lapse, or the crash
  core::RoutePolicy policy;      // the route as this exchange claimed it
  bool completed = false;        // a completion reached the store
};

// When a claim's statement runs and commits (only a claim whose reply is lost lands late).
enum class ClaimLands {
  at_once,         // it runs within query_timeout and commits at once
  commit_late,     // it runs within query_timeout; its record becomes visible at late_at
  statement_late,  // it runs (and commits) at late_at: queued in a pooler
  never,           // it never runs
};

// One client request (a retry of the same logical request) and every delay it will meet.
struct Attempt {
  int id = 0;
  milliseconds arrival{0};
  bool store_unreachable = false;    // the claim never ran (no connection)
  milliseconds claim_runs_after{0};  // INSERT runs this long after sending, <= query_timeout
  bool claim_reply_lost = false;
  milliseconds claim_reply_after{0};  // >= claim_runs_after, <= query_timeout
  ClaimLands claim_lands = ClaimLands::at_once;
  milliseconds late_at{0};                // commit_late, statement_late: >= arrival + query_timeout
  bool cancelled_after_deadline = false;  // a statement that waited past its deadline is cancelled by the server
  bool connect_fails = false;
  milliseconds connect{0};            // <= connect_timeout (x2 over TLS)
  bool upstream_answers = true;       // false: connection lost before any answer
  milliseconds upstream_duration{0};  // how long the upstream works (may exceed upstream.timeout)
  milliseconds write_acquire{0};      // the settling write waits this long for a connection
  milliseconds write_runs_after{0};   // then its statement runs within query_timeout
  bool write_reply_lost = false;
  bool write_never_runs = false;  // the store cannot be reached for it: only background retries remain
  milliseconds retry_every{0};    // background owner-write retries
  int background_losses = 0;      // how many background retries are lost before one lands
  std::optional<milliseconds> crash_at;
};

// How often the timelines met what late commits are about (printed, and some must occur).
struct Coverage {
  std::uint64_t late_commits = 0;                   // records made visible after their proxy gave up
  std::uint64_t late_commits_after_release = 0;     // ... after their owner's release had landed
  std::uint64_t late_statements_after_release = 0;  // queued claims run after their owner's release
  std::uint64_t waits = 0;                          // statements that waited on an uncommitted claim
  std::uint64_t released_records_taken_over = 0;    // claims that took over a record of a released owner
  // End states held by a request that never ran, whose proxy died before its release landed, or
  // whose release never reached the store before the owner-write horizon.
  std::uint64_t held_after_crash = 0;
  std::uint64_t held_after_horizon = 0;

  void add(const Coverage& other) {
    late_commits += other.late_commits;
    late_commits_after_release += other.late_commits_after_release;
    late_statements_after_release += other.late_statements_after_release;
    waits += other.waits;
    released_records_taken_over += other.released_records_taken_over;
    held_after_crash += other.held_after_crash;
    held_after_horizon += other.held_after_horizon;
  }
};

class Timeline {
 public:
  Timeline(const Setting& setting, const Sabotage& sabotage, std::mt19937_64& random)
      : setting_(setting), sabotage_(sabotage), random_(random), store_(clock_) {}

  // Runs the attempts and any operator release; returns a description of the first violation.
  std::optional<std::string> run(const std::vector<Attempt>& attempts, std::optional<milliseconds> release_at,
                                 const std::vector<milliseconds>& sweeps) {
    for (const Attempt& attempt : attempts) at(attempt.arrival, attempt.id, [this, attempt] { start(attempt); });
    if (release_at) at(*release_at, -1, [this] { operator_release(); });
    for (const milliseconds sweep : sweeps) at(sweep, -1, [this] { sweep_expired(); });
    while (!events_.empty()) {
      Event event = events_.top();
      events_.pop();
      clock_.set(event.time);
      if (event.attempt >= 0 && crashed(event.attempt, event.time)) continue;
      event.run();
      // The model's idea of whose record the key holds must match the store's.
      if (holder_.has_value() != store_.contains({kScope, kKey})) {
        note_violation("the model lost track of the key's record");
      }
    }
    claim_at_the_end();
    return check();
  }

  const std::string& log() const { return log_; }
  const Coverage& coverage() const { return coverage_; }

 private:
  static constexpr const char* kScope = "scope";
  static constexpr const char* kKey = "key";
  static constexpr const char* kFingerprint = "v1:fingerprint";
  static constexpr int kFreshRetry = 99;  // the claim at the end

  struct Event {
    milliseconds time;
    std::uint64_t order;  // ties: a random order, so same-millisecond events interleave every way
    int attempt;          // -1: not an exchange's (release, sweep, a commit in the database)
    std::function<void()> run;
    bool operator<(const Event& other) const { return time != other.time ? time > other.time : order > other.order; }
  };

  // Whose record the key holds (an expired one too, until a sweep deletes it).
  struct Holder {
    int attempt = 0;
    core::RecordState state = core::RecordState::in_flight;
  };

  // A claim evaluated but not committed yet, and the statements that wait on its row.
  struct Uncommitted {
    int attempt = 0;
    std::function<void()> make_visible;
    std::optional<int> replaces;  // the owner of the record it replaces: its writes wait
    bool replaces_a_row = false;  // else it inserts one: an operator release would find nothing
    std::vector<std::function<void()>> waiting;
    int sweeps = 0;  // reaper runs held back until the waiting statements ran
  };

  // One statement an exchange waits for: its answer counts only if it comes before the deadline.
  struct Reply {
    bool answered = false;
    bool given_up = false;
  };

  void at(milliseconds time, int attempt, std::function<void()> run) {
    events_.push(Event{time, random_(), attempt, std::move(run)});
  }

  bool crashed(int attempt, milliseconds time) const {
    const auto it = crash_at_.find(attempt);
    return it != crash_at_.end() && time >= it->second;
  }

  bool released(int attempt) const { return released_at_owner_.contains(attempt); }

  bool executed(int attempt) const {
    return std::any_of(executions_.begin(), executions_.end(),
                       [attempt](const Execution& execution) { return execution.attempt == attempt; });
  }

  void trace(const std::string& what) { log_ += "  " + std::to_string(clock_.elapsed().count()) + "ms " + what + "\n"; }

  static std::string name(int attempt) { return "#" + std::to_string(attempt); }

  void note_violation(const std::string& what) {
    trace("VIOLATION: " + what);
    if (!violation_) violation_ = what;
  }

  const core::RoutePolicy& policy_at(milliseconds time) const {
    return time >= setting_.reload_at ? setting_.after : setting_.before;
  }

  store::ClaimRequest claim_request(int attempt, const core::RoutePolicy& policy) const {
    store::ClaimRequest request{.scope = kScope,
                                .key = kKey,
                                .fingerprint = kFingerprint,
                                .owner = owner(attempt),
                                .ttl = policy.ttl,
                                .lease = policy.lease,
                                .take_over_lapsed_lease = policy.unknown_outcome == core::UnknownOutcome::retry};
    if (!request.take_over_lapsed_lease && !sabotage_.forget_unsettled_retention) {
      request.unsettled_retention = policy.unknown_retention;
    }
    return request;
  }

  void start(const Attempt& attempt) {
    if (attempt.crash_at) {
      crash_at_[attempt.id] = *attempt.crash_at;
      at(*attempt.crash_at, -1, [this, id = attempt.id] { trace(name(id) + "'s proxy crashes"); });
    }
    const core::RoutePolicy policy = policy_at(attempt.arrival);
    const milliseconds sent = clock_.elapsed();
    trace(name(attempt.id) + " claim sent (" +
          (policy.unknown_outcome == core::UnknownOutcome::retry ? "retry" : "lock") + ", lease " +
          std::to_string(policy.lease.count()) + "ms)");
    if (attempt.store_unreachable) {
      const core::ClaimFailure failure = core::after_claim_failure(StoreError::unavailable, policy);
      EXPECT_EQ(failure.answer, core::ClaimFailureAnswer::unavailable);  // fail_closed routes only
      return;
    }
    const auto reply = std::make_shared<Reply>();
    switch (attempt.claim_lands) {
      case ClaimLands::at_once:
      case ClaimLands::commit_late:
        at(sent + attempt.claim_runs_after, attempt.id,
           [this, attempt, policy, sent, reply] { claim_statement(attempt, policy, sent, reply); });
        break;
      case ClaimLands::statement_late:
        at(attempt.late_at, attempt.id, [this, attempt, policy, sent, reply] {
          trace(name(attempt.id) + "'s queued claim reaches the database");
          if (released(attempt.id)) ++coverage_.late_statements_after_release;
          claim_statement(attempt, policy, sent, reply);
        });
        break;
      case ClaimLands::never: break;
    }
    at(sent + setting_.timeouts.store_query, attempt.id, [this, attempt, policy, sent, reply] {
      if (reply->answered) return;
      reply->given_up = true;
      const core::ClaimFailure failure = core::after_claim_failure(StoreError::reply_lost, policy);
      EXPECT_EQ(failure.answer, core::ClaimFailureAnswer::unavailable);
      trace(name(attempt.id) + " claim reply lost: 503");
      if (failure.release_claim) settle_in_background(attempt, policy, core::OwnerWrite::release, sent, 0);
    });
  }

  // The claim's statement runs in the database now, or waits on an uncommitted claim of the key.
  // `began`: when a statement that waited began, its now() (its lease and expiry count from then).
  void claim_statement(const Attempt& attempt, const core::RoutePolicy& policy, milliseconds sent,
                       const std::shared_ptr<Reply>& reply, std::optional<milliseconds> began = std::nullopt) {
    const milliseconds deadline = sent + setting_.timeouts.store_query;
    const milliseconds claimed_at = began.value_or(clock_.elapsed());
    if (uncommitted_) {
      trace(name(attempt.id) + " claim waits on " + name(uncommitted_->attempt) + "'s uncommitted claim");
      ++coverage_.waits;
      uncommitted_->waiting.push_back([this, attempt, policy, sent, reply, deadline, claimed_at] {
        if (attempt.cancelled_after_deadline && clock_.elapsed() >= deadline) {
          trace(name(attempt.id) + "'s waiting claim was cancelled by statement_timeout");
          return;
        }
        claim_statement(attempt, policy, sent, reply, claimed_at);
      });
      return;
    }
    const std::optional<Holder> before = holder_;
    StoreError error = StoreError::internal;
    core::ClaimResult result;
    const auto answer = [&error, &result](StoreError e, core::ClaimResult claim) {
      error = e;
      result = std::move(claim);
    };
    const store::ClaimRequest request = claim_request(attempt.id, policy);
    const milliseconds now = clock_.elapsed();
    clock_.set(claimed_at);  // the statement's now(), for the store; the events go on at `now`
    if (attempt.claim_lands == ClaimLands::commit_late) {
      std::function<void()> make_visible = store_.claim_visible_later(request, answer);
      if (make_visible) {
        uncommitted_ = Uncommitted{.attempt = attempt.id,
                                   .make_visible = std::move(make_visible),
                                   .replaces = holder_ ? std::optional<int>(holder_->attempt) : std::nullopt,
                                   .replaces_a_row = holder_.has_value(),
                                   .waiting = {}};
        at(std::max(now, attempt.late_at), -1, [this] { commit_late_claim(); });
      }
    } else {
      store_.claim(request, answer);
      if (result.claimed) holder_ = Holder{attempt.id, core::RecordState::in_flight};
    }
    clock_.set(now);
    trace(name(attempt.id) + " claim ran: " +
          (error != StoreError::ok ? std::string(core::store_error_name(error))
           : result.claimed
               ? (uncommitted_ && uncommitted_->attempt == attempt.id ? "claimed, commit pending" : "claimed")
               : "existing record"));
    observe_claim(attempt.id, error, result, before);
    if (attempt.claim_reply_lost) return;
    // The reply, after the statement ran (at the same millisecond at the earliest), unless the
    // statement waited so long that the proxy gave up first.
    const milliseconds reply_at = std::max(clock_.elapsed(), sent + attempt.claim_reply_after);
    if (reply_at > deadline) return;
    EXPECT_EQ(error, StoreError::ok);
    at(reply_at, attempt.id, [this, attempt, policy, result, claimed_at, sent, reply] {
      if (reply->given_up) return;  // the deadline came first, at the same millisecond
      reply->answered = true;
      const core::Decision decision = core::decide(result, kFingerprint, policy);
      trace(name(attempt.id) + " decision " + std::string(core::action_name(decision.action)));
      if (decision.action != core::Action::execute) return;
      forward(attempt, policy, sent, claimed_at);
    });
  }

  // What every claim's answer must respect: a released owner's record never holds the key. A
  // claim whose own owner was released already is not asked: its proxy gave up on it, no one reads
  // its answer.
  void observe_claim(int attempt, StoreError error, const core::ClaimResult& result,
                     const std::optional<Holder>& before) {
    if (error != StoreError::ok) return;
    if (result.claimed) {
      if (before && released(before->attempt)) ++coverage_.released_records_taken_over;
      return;
    }
    if (holder_ && released(holder_->attempt) && !released(attempt)) {
      note_violation("a key locked by a request that never ran: " + name(attempt) + "'s claim at " +
                     std::to_string(clock_.elapsed().count()) + "ms found the " +
                     std::string(core::record_state_name(holder_->state)) + " record of " + name(holder_->attempt) +
                     ", whose release landed at " + std::to_string(released_at_owner_.at(holder_->attempt).count()) +
                     "ms");
    }
  }

  void commit_late_claim() {
    Uncommitted committed = std::move(*uncommitted_);
    uncommitted_.reset();
    committed.make_visible();
    holder_ = Holder{committed.attempt, core::RecordState::in_flight};
    ++coverage_.late_commits;
    const bool after_release = released(committed.attempt);
    if (after_release) ++coverage_.late_commits_after_release;
    trace(name(committed.attempt) + "'s claim commits: its in-flight record is visible" +
          (after_release ? ", after its release landed" : ""));
    std::shuffle(committed.waiting.begin(), committed.waiting.end(), random_);
    for (const auto& waiting : committed.waiting) waiting();  // each may wait again, on a claim among them
    for (int i = 0; i < committed.sweeps; ++i) sweep_expired();
  }

  void operator_release() {
    if (uncommitted_ && uncommitted_->replaces_a_row) {  // FOR UPDATE waits on the row
      trace("operator release waits on " + name(uncommitted_->attempt) + "'s uncommitted claim");
      uncommitted_->waiting.push_back([this] { operator_release(); });
      return;
    }
    StoreError answer = StoreError::internal;
    store_.force_release({kScope, kKey}, [&answer](StoreError error, milliseconds) { answer = error; });
    if (answer == StoreError::ok) {
      released_at_.push_back(clock_.elapsed());
      holder_.reset();
    }
    trace("operator release: " + std::string(core::store_error_name(answer)));
  }

  // A sweep while statements wait on an uncommitted claim runs after them. Those that began
  // before it still see, in their snapshots, the fences it deletes; for those that began after it,
  // a fence it deleted had outlived its owner's record (fence_lifetime). Under synchronous
  // replication its own commit would wait for the same standby, too.
  void sweep_expired() {
    if (uncommitted_) {
      ++uncommitted_->sweeps;
      return;
    }
    store_.sweep_expired(100, [this](StoreError, std::size_t deleted) {
      if (deleted > 0) holder_.reset();  // one key: its record
    });
  }

  void forward(const Attempt& attempt, const core::RoutePolicy& policy, milliseconds sent, milliseconds claimed_at) {
    const milliseconds now = clock_.elapsed();
    if (attempt.connect_fails) {
      at(now + attempt.connect, attempt.id, [this, attempt, policy, sent] {
        const core::RecordFate fate = core::after_upstream_failure(core::UpstreamFailureKind::nothing_sent, policy);
        EXPECT_EQ(fate, core::RecordFate::release);
        settle(attempt, policy, core::OwnerWrite::release, sent, std::nullopt);
      });
      return;
    }
    at(now + attempt.connect, attempt.id, [this, attempt, policy, sent, claimed_at] {
      const std::size_t index = executions_.size();
      executions_.push_back(Execution{.attempt = attempt.id,
                                      .claimed_at = claimed_at,
                                      .started_at = clock_.elapsed(),
                                      .exchange_end = milliseconds::max(),
                                      .policy = policy,
                                      .completed = false});
      trace(name(attempt.id) + " EXECUTES upstream");
      const milliseconds timeout = setting_.timeouts.upstream;
      if (attempt.upstream_answers && attempt.upstream_duration <= timeout) {
        at(clock_.elapsed() + attempt.upstream_duration, attempt.id, [this, attempt, policy, sent, index] {
          EXPECT_EQ(core::classify_response(200, "", 2, policy), core::Outcome::store);
          settle(attempt, policy, core::OwnerWrite::complete, sent, index);
        });
      } else {
        const milliseconds gives_up = attempt.upstream_answers ? timeout : std::min(timeout, attempt.upstream_duration);
        at(clock_.elapsed() + gives_up, attempt.id, [this, attempt, policy, sent, index] {
          const core::RecordFate fate =
              core::after_upstream_failure(core::UpstreamFailureKind::outcome_unknown, policy);
          trace(name(attempt.id) + " upstream outcome unknown: " + std::string(core::record_fate_name(fate)));
          if (fate == core::RecordFate::leave_in_flight) {
            end_exchange(index);
            return;
          }
          EXPECT_EQ(fate, core::RecordFate::mark_unknown);
          settle(attempt, policy, core::OwnerWrite::mark_unknown, sent, index);
        });
      }
    });
  }

  // The exchange's own settling write: a pooled connection, then the statement; its reply may be
  // lost, or come too late (it waited on an uncommitted claim): then it is retried in the background.
  void settle(const Attempt& attempt, const core::RoutePolicy& policy, core::OwnerWrite write, milliseconds sent,
              std::optional<std::size_t> execution) {
    const milliseconds started = clock_.elapsed();
    if (attempt.write_never_runs) {
      at(started + attempt.write_acquire, attempt.id, [this, attempt, policy, write, sent, execution] {
        if (execution) end_exchange(*execution);
        EXPECT_EQ(core::after_owner_write(write, StoreError::unavailable), core::OwnerWriteNext::retry);
        settle_in_background(attempt, policy, write, sent, 0);
      });
      return;
    }
    const auto reply = std::make_shared<Reply>();
    at(started + attempt.write_acquire + attempt.write_runs_after, attempt.id,
       [this, attempt, policy, write, execution, reply] {
         send(attempt.id, policy, write, [this, attempt, write, execution, reply](StoreError error) {
           if (error == StoreError::ok && write == core::OwnerWrite::complete && execution) {
             executions_[*execution].completed = true;
           }
           if (execution) end_exchange(*execution);  // the record is settled (or, not_owner, no longer ours)
           if (attempt.write_reply_lost || reply->given_up) return;
           reply->answered = true;
         });
       });
    at(started + attempt.write_acquire + setting_.timeouts.store_query, attempt.id,
       [this, attempt, policy, write, sent, reply] {
         if (reply->answered) return;
         reply->given_up = true;
         EXPECT_EQ(core::after_owner_write(write, StoreError::reply_lost), core::OwnerWriteNext::retry);
         settle_in_background(attempt, policy, write, sent, 0);
       });
  }

  // Retries of a write whose reply was lost, until one is answered or the owner-write horizon passes.
  void settle_in_background(const Attempt& attempt, const core::RoutePolicy& policy, core::OwnerWrite write,
                            milliseconds sent, int tries) {
    const milliseconds next = clock_.elapsed() + attempt.retry_every;
    if (next > sent + core::owner_write_horizon(policy)) {
      trace(name(attempt.id) + " gives up its background " + std::string(core::owner_write_name(write)));
      gave_up_.insert(attempt.id);
      return;
    }
    at(next, attempt.id, [this, attempt, policy, write, sent, tries] {
      if (tries < attempt.background_losses) {  // not run at all (store unreachable): try again
        settle_in_background(attempt, policy, write, sent, tries + 1);
        return;
      }
      const auto reply = std::make_shared<Reply>();
      send(attempt.id, policy, write, [this, attempt, write, reply](StoreError error) {
        trace(name(attempt.id) + " background " + std::string(core::owner_write_name(write)) + ": " +
              std::string(core::store_error_name(error)));
        if (error == StoreError::ok && write == core::OwnerWrite::complete) {
          for (Execution& execution : executions_) {
            if (execution.attempt == attempt.id) execution.completed = true;
          }
        }
        if (reply->given_up) return;  // too late: the proxy already sent it again
        reply->answered = true;
        EXPECT_NE(core::after_owner_write(write, error), core::OwnerWriteNext::retry);
      });
      if (reply->answered) return;
      at(clock_.elapsed() + setting_.timeouts.store_query, attempt.id,
         [this, attempt, policy, write, sent, tries, reply] {
           if (reply->answered) return;
           reply->given_up = true;
           settle_in_background(attempt, policy, write, sent, tries + 1);
         });
    });
  }

  // Runs an owner write now; `landed` gets its answer when it takes effect. The writes of a
  // record that an uncommitted claim replaces wait on its row until it commits.
  void send(int attempt, const core::RoutePolicy& policy, core::OwnerWrite write,
            std::function<void(StoreError)> landed) {
    if (uncommitted_ && uncommitted_->replaces == attempt) {
      trace(name(attempt) + " " + std::string(core::owner_write_name(write)) + " waits on " +
            name(uncommitted_->attempt) + "'s uncommitted claim");
      ++coverage_.waits;
      uncommitted_->waiting.push_back(
          [this, attempt, policy, write, landed = std::move(landed)] { send(attempt, policy, write, landed); });
      return;
    }
    StoreError answer = StoreError::internal;
    const auto done = [&answer](StoreError error) { answer = error; };
    const bool holds_in_flight =
        holder_ && holder_->attempt == attempt && holder_->state == core::RecordState::in_flight;
    switch (write) {
      case core::OwnerWrite::complete: {
        store::CompleteRequest request{.scope = kScope,
                                       .key = kKey,
                                       .owner = owner(attempt),
                                       .state = core::RecordState::completed,
                                       .response = {},
                                       .ttl = policy.ttl};
        request.response.status = 200;
        request.response.body = "ok";
        store_.complete(request, done);
        if (answer == StoreError::ok) holder_->state = core::RecordState::completed;
        break;
      }
      case core::OwnerWrite::release:
        if (sabotage_.release_trusts_zero_rows && !holds_in_flight) {
          answer = StoreError::not_owner;  // nothing to delete, and nothing more done about it
        } else {
          store_.release({.scope = kScope,
                          .key = kKey,
                          .owner = owner(attempt),
                          .ttl = policy.ttl,
                          .unknown_retention = policy.unknown_retention},
                         done);
        }
        if (answer == StoreError::ok) holder_.reset();
        // From now on the key is free of this owner for good (Store::release).
        if (answer == StoreError::ok || answer == StoreError::not_owner) {
          released_at_owner_.try_emplace(attempt, clock_.elapsed());
        }
        break;
      case core::OwnerWrite::mark_unknown:
        store_.mark_unknown({.scope = kScope,
                             .key = kKey,
                             .owner = owner(attempt),
                             .ttl = policy.ttl,
                             .unknown_retention = policy.unknown_retention},
                            done);
        if (answer == StoreError::ok) holder_->state = core::RecordState::unknown;
        break;
    }
    trace(name(attempt) + " " + std::string(core::owner_write_name(write)) +
          " ran: " + std::string(core::store_error_name(answer)));
    landed(answer);
  }

  void end_exchange(std::size_t execution) {
    executions_[execution].exchange_end = std::min(executions_[execution].exchange_end, clock_.elapsed());
  }

  static std::string owner(int attempt) { return "owner-" + std::to_string(attempt); }

  // Once everything settled: a retry of the key must be able to run, unless a request that really
  // started upstream (or may have: its proxy died, or could not reach the store, before releasing
  // its claim) holds it.
  void claim_at_the_end() {
    if (uncommitted_) {
      note_violation("a claim still uncommitted at the end");
      return;
    }
    const std::optional<Holder> before = holder_;
    StoreError error = StoreError::internal;
    core::ClaimResult result;
    store_.claim(claim_request(kFreshRetry, policy_at(clock_.elapsed())), [&](StoreError e, core::ClaimResult claim) {
      error = e;
      result = std::move(claim);
    });
    trace("a fresh claim after everything settled: " + (error != StoreError::ok
                                                            ? std::string(core::store_error_name(error))
                                                        : result.claimed ? "claimed"
                                                                         : "existing record"));
    observe_claim(kFreshRetry, error, result, before);
    if (error != StoreError::ok) {
      note_violation("a fresh claim at the end failed: " + std::string(core::store_error_name(error)));
      return;
    }
    if (result.claimed || !holder_) return;
    const int holder = holder_->attempt;
    if (executed(holder) || released(holder)) return;  // a real execution; or reported by observe_claim
    if (crash_at_.contains(holder)) {
      ++coverage_.held_after_crash;
      return;
    }
    if (gave_up_.contains(holder)) {
      ++coverage_.held_after_horizon;
      return;
    }
    note_violation("a key locked by a request that never ran: at the end it holds the " +
                   std::string(core::record_state_name(holder_->state)) + " record of " + name(holder) +
                   ", which neither ran nor was released");
  }

  std::optional<std::string> check() {
    // A crashed exchange ended when its proxy died.
    for (Execution& execution : executions_) {
      if (const auto it = crash_at_.find(execution.attempt); it != crash_at_.end()) {
        execution.exchange_end = std::min(execution.exchange_end, it->second);
      }
    }
    for (std::size_t later = 0; later < executions_.size(); ++later) {
      for (std::size_t earlier = 0; earlier < later; ++earlier) {
        const Execution& e1 = executions_[earlier];
        const Execution& e2 = executions_[later];
        const auto describe = [&](const std::string& what) {
          return what + ": #" + std::to_string(e1.attempt) + " claimed at " + std::to_string(e1.claimed_at.count()) +
                 "ms, started at " + std::to_string(e1.started_at.count()) + "ms, its exchange ended at " +
                 (e1.exchange_end == milliseconds::max() ? std::string("never")
                                                         : std::to_string(e1.exchange_end.count()) + "ms") +
                 "; #" + std::to_string(e2.attempt) + " claimed at " + std::to_string(e2.claimed_at.count()) +
                 "ms, started at " + std::to_string(e2.started_at.count()) + "ms";
        };
        // e2's claim is what lets it run: taking the key while e1 may still settle it is the fault.
        if (e2.claimed_at <= e1.exchange_end)
          return describe("a second execution while the first exchange may still run");
        const bool released = std::any_of(released_at_.begin(), released_at_.end(),
                                          [&](milliseconds at) { return at >= e1.claimed_at && at <= e2.claimed_at; });
        if (released) continue;
        if (e2.claimed_at < e1.claimed_at + e1.policy.lease)
          return describe("a second execution within the first's lease");
        if (e1.completed) {
          if (e2.claimed_at < e1.claimed_at + e1.policy.ttl)
            return describe("a completed key executed again within its ttl");
          continue;
        }
        // The route as e1 claimed it, or as it is since a reload, asks for a re-run after the lease.
        if (e1.policy.unknown_outcome == core::UnknownOutcome::retry ||
            e2.policy.unknown_outcome == core::UnknownOutcome::retry) {
          continue;
        }
        if (e2.claimed_at < e1.claimed_at + e1.policy.ttl + e1.policy.unknown_retention) {
          return describe("an unknown outcome executed again within ttl + unknown_retention");
        }
      }
    }
    return violation_;
  }

  const Setting& setting_;
  const Sabotage& sabotage_;
  std::mt19937_64& random_;
  SimulatedClock clock_;
  store::MemoryStore store_;
  std::priority_queue<Event> events_;
  std::map<int, milliseconds> crash_at_;
  std::vector<Execution> executions_;
  std::vector<milliseconds> released_at_;          // operator releases that deleted the record
  std::optional<Holder> holder_;                   // the key's record, as the store shows it
  std::optional<Uncommitted> uncommitted_;         // at most one: the key's other claims wait on it
  std::map<int, milliseconds> released_at_owner_;  // owners whose release landed, and when
  std::set<int> gave_up_;                          // owners whose background write passed its horizon
  std::optional<std::string> violation_;           // the first lock found
  Coverage coverage_;
  std::string log_;
};

// ---- Drawing timelines --------------------------------------------------------------------------

class Draw {
 public:
  explicit Draw(std::mt19937_64& random) : random_(random) {}

  bool chance(double p) { return std::bernoulli_distribution(p)(random_); }
  std::int64_t between(std::int64_t low, std::int64_t high) {  // inclusive
    return std::uniform_int_distribution<std::int64_t>(low, high)(random_);
  }
  // Up to `bound`, with its edges (0, 1 ms, bound - 1 ms, bound) as likely as the whole inside.
  milliseconds up_to(milliseconds bound) {
    const std::int64_t b = bound.count();
    switch (between(0, 7)) {
      case 0: return 0ms;
      case 1: return milliseconds(std::min<std::int64_t>(1, b));
      case 2: return milliseconds(std::max<std::int64_t>(0, b - 1));
      case 3: return bound;
      default: return milliseconds(between(0, b));
    }
  }

 private:
  std::mt19937_64& random_;
};

core::RoutePolicy draw_policy(Draw& draw, const core::ExchangeBudget& budget, const Sabotage& sabotage) {
  core::RoutePolicy policy;
  policy.unknown_outcome = draw.chance(0.5) ? core::UnknownOutcome::lock : core::UnknownOutcome::retry;
  // The simulated exchange spends no time between its steps, so the margin (kLeaseMargin: for what
  // no timeout bounds) is left out: a lease 1 ms over the longest exchange must already hold.
  policy.lease = sabotage.lease_below_longest_exchange
                     ? milliseconds(draw.between(budget.total.count() / 2, budget.total.count() - 1))
                     : budget.total + milliseconds(draw.chance(0.5) ? 1 : draw.between(1, 2'000));
  policy.ttl = policy.lease + milliseconds(draw.chance(0.3) ? 1 : draw.between(1, 4'000));
  policy.unknown_retention = milliseconds(draw.between(1, 4'000));
  return policy;
}

Setting draw_setting(Draw& draw, const Sabotage& sabotage) {
  Setting setting;
  setting.timeouts = {.store_query = milliseconds(draw.between(50, 500)),
                      .store_acquire = milliseconds(draw.between(0, 300)),
                      .connect = milliseconds(draw.between(20, 300)),
                      .upstream_tls = draw.chance(0.5),
                      .upstream = milliseconds(draw.between(100, 1'500))};
  const core::ExchangeBudget budget = core::longest_exchange(setting.timeouts);
  setting.before = draw_policy(draw, budget, sabotage);
  // A reload changes the route for claims sent from then on (checked against the same running
  // timeouts, as the config reader does); half the timelines reload, at any moment.
  setting.after = draw.chance(0.5) ? draw_policy(draw, budget, sabotage) : setting.before;
  setting.reload_at = milliseconds(draw.between(0, 8'000));
  return setting;
}

// A lost claim reply: when its statement runs and commits. A late one lands at any moment after
// the proxy gave up on it, with the moments that matter as likely as the rest: right at the
// give-up, around the landing of its owner's release, around the end of its lease. A commit
// lands at any moment, however late. A statement queued whole starts before its owner's fence
// expires (fence_lifetime after the release, at least ttl + unknown_retention): the fence's expiry assumes that the claim's now()
// came before the release (store README "Fences"); one queued longer than that would insert
// after the reaper swept the fence.
void draw_late_claim(Draw& draw, const Setting& setting, Attempt& attempt) {
  const std::int64_t kind = draw.between(0, 19);
  attempt.claim_lands = kind < 8    ? ClaimLands::at_once
                        : kind < 14 ? ClaimLands::commit_late
                        : kind < 19 ? ClaimLands::statement_late
                                    : ClaimLands::never;
  const core::RoutePolicy& policy = attempt.arrival >= setting.reload_at ? setting.after : setting.before;
  const milliseconds gave_up = attempt.arrival + setting.timeouts.store_query;
  // The release's first run (it lands then unless it waits on an uncommitted claim: later).
  const milliseconds release = gave_up + attempt.retry_every * (attempt.background_losses + 1);
  const milliseconds lease_end = attempt.arrival + attempt.claim_runs_after + policy.lease;
  const milliseconds latest = attempt.claim_lands == ClaimLands::statement_late
                                  ? release + policy.ttl + policy.unknown_retention - 1ms
                                  : gave_up + policy.ttl + policy.unknown_retention + 2'000ms;
  switch (draw.between(0, 8)) {
    case 0: attempt.late_at = gave_up; break;
    case 1: attempt.late_at = gave_up + 1ms; break;
    case 2: attempt.late_at = release - 1ms; break;
    case 3: attempt.late_at = release; break;
    case 4: attempt.late_at = release + 1ms; break;
    case 5: attempt.late_at = std::max(gave_up, lease_end + milliseconds(draw.between(-1, 1))); break;
    case 6: attempt.late_at = latest; break;
    default: attempt.late_at = milliseconds(draw.between(gave_up.count(), latest.count()));
  }
}

Attempt draw_attempt(Draw& draw, const Setting& setting, int id, milliseconds horizon) {
  const core::ExchangeTimeouts& t = setting.timeouts;
  Attempt attempt;
  attempt.id = id;
  attempt.arrival = milliseconds(draw.between(0, horizon.count()));
  attempt.store_unreachable = draw.chance(0.03);
  attempt.claim_runs_after = draw.up_to(t.store_query);
  attempt.claim_reply_lost = draw.chance(0.15);
  attempt.claim_reply_after = attempt.claim_runs_after + draw.up_to(t.store_query - attempt.claim_runs_after);
  attempt.cancelled_after_deadline = draw.chance(0.5);
  const milliseconds connect_bound = t.connect * (t.upstream_tls ? 2 : 1);
  attempt.connect = draw.up_to(connect_bound);
  attempt.connect_fails = draw.chance(0.05);
  if (attempt.connect_fails) attempt.connect = connect_bound;
  attempt.upstream_answers = !draw.chance(0.05);
  attempt.upstream_duration =
      draw.chance(0.2) ? t.upstream + milliseconds(draw.between(1, 3'000)) : draw.up_to(t.upstream);
  attempt.write_acquire = draw.up_to(t.store_acquire);
  attempt.write_runs_after = draw.up_to(t.store_query);
  attempt.write_reply_lost = draw.chance(0.1);
  attempt.write_never_runs = draw.chance(0.05);
  attempt.retry_every = milliseconds(draw.between(50, 1'000));
  attempt.background_losses = static_cast<int>(draw.between(0, 3));
  if (attempt.claim_reply_lost) draw_late_claim(draw, setting, attempt);
  if (draw.chance(0.15)) attempt.crash_at = attempt.arrival + milliseconds(draw.between(0, 4'000));
  return attempt;
}

struct Exploration {
  std::uint64_t timelines = 0;
  Coverage coverage;
  std::optional<std::string> violation;
};

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

Exploration explore(std::uint64_t seed, std::uint64_t timelines, const Sabotage& sabotage) {
  std::mt19937_64 random(seed);
  Draw draw(random);
  Exploration result;
  for (; result.timelines < timelines && !result.violation; ++result.timelines) {
    const Setting setting = draw_setting(draw, sabotage);
    const milliseconds horizon = std::max(setting.before.ttl + setting.before.unknown_retention,
                                          setting.after.ttl + setting.after.unknown_retention) +
                                 2'000ms;
    std::vector<Attempt> attempts;
    const int count = static_cast<int>(draw.between(2, 5));
    for (int id = 0; id < count; ++id) attempts.push_back(draw_attempt(draw, setting, id, horizon));
    std::optional<milliseconds> release_at;
    if (draw.chance(0.3)) release_at = milliseconds(draw.between(0, horizon.count()));
    std::vector<milliseconds> sweeps;
    for (int i = static_cast<int>(draw.between(0, 3)); i > 0; --i)
      sweeps.push_back(milliseconds(draw.between(0, horizon.count())));

    Timeline timeline(setting, sabotage, random);
    if (auto violation = timeline.run(attempts, release_at, sweeps)) {
      result.violation = *violation + "\n" + timeline.log();
    }
    result.coverage.add(timeline.coverage());
  }
  return result;
}

// ---- The tests ----------------------------------------------------------------------------------

TEST(TimingModel, NoTimelineRunsAKeyTwiceOrLocksItForARequestThatNeverRan) {
  const std::uint64_t seed = env_or("IDEMPROXY_MODEL_SEED", 20261125);
  const std::uint64_t timelines = env_or("IDEMPROXY_MODEL_TIMELINES", 100'000);
  const Exploration result = explore(seed, timelines, Sabotage{});
  const Coverage& seen = result.coverage;
  std::cout << "[ timing model ] seed " << seed << ": " << result.timelines << " timelines explored; "
            << seen.late_commits << " claims committed after their proxy gave up (" << seen.late_commits_after_release
            << " after their release landed), " << seen.late_statements_after_release
            << " queued claims ran after their release, " << seen.waits
            << " statements waited on an uncommitted claim, " << seen.released_records_taken_over
            << " records of released owners taken over, "
            << "at the end " << seen.held_after_crash
            << " keys held by a request whose proxy died before releasing it and " << seen.held_after_horizon
            << " by one whose release never reached the store within the ttl\n";
  EXPECT_FALSE(result.violation) << "seed " << seed << ", timeline " << result.timelines << ": " << *result.violation;
  EXPECT_EQ(result.timelines, timelines);
  // The late commits were met, and their records taken over (not only expired unseen).
  if (timelines >= 10'000) {
    EXPECT_GT(seen.late_commits_after_release, 0u);
    EXPECT_GT(seen.late_statements_after_release, 0u);
    EXPECT_GT(seen.released_records_taken_over, 0u);
  }
}

// A sabotaged rule must be caught: returns the violation found, printed as the evidence.
void expect_caught(const Sabotage& sabotage, std::string_view what, std::string_view violation_kind) {
  const std::uint64_t seed = env_or("IDEMPROXY_MODEL_SEED", 20261125);
  const Exploration result = explore(seed, 20'000, sabotage);
  ASSERT_TRUE(result.violation) << what << ": the checker found nothing in " << result.timelines << " timelines";
  std::cout << "[ timing model ] " << what << ": found after " << result.timelines << " timelines:\n"
            << *result.violation;
  EXPECT_NE(result.violation->find(violation_kind), std::string::npos) << *result.violation;
}

TEST(TimingModel, ALeaseShorterThanTheLongestExchangeIsFoundToExecuteTwice) {
  expect_caught(Sabotage{.lease_below_longest_exchange = true}, "lease below the longest exchange",
                "while the first exchange may still run");
}

TEST(TimingModel, AnUnsettledRecordKeptOnlyItsTtlIsFoundToExecuteTwice) {
  expect_caught(Sabotage{.forget_unsettled_retention = true}, "unsettled record kept only its ttl",
                "within ttl + unknown_retention");
}

// "The release deleted nothing, so the claim never committed": without the fence, a claim that
// commits after its release leaves an in-flight record of a request that never ran.
TEST(TimingModel, AReleaseThatTrustsZeroRowsIsFoundToLockAKeyThatNeverRan) {
  expect_caught(Sabotage{.release_trusts_zero_rows = true}, "release trusting '0 rows deleted' (no fence)",
                "a key locked by a request that never ran");
}

}  // namespace
}  // namespace idem
