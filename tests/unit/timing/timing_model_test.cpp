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
// What must hold, for every pair of executions (the upstream started) of the key, the earlier
// e1 and the later e2:
//   1. e2 never claims the key while e1's exchange may still be under way (from its claim until
//      its settling write ran, its proxy gave up on the upstream, or it crashed). In any mode.
//   2. e2 never starts within e1's lease, nor within e1's ttl when e1 completed, nor within
//      ttl + unknown_retention when e1's outcome is unknown (it timed out or its proxy died),
//      unless an operator released the record in between, or (unknown outcome only) the route
//      says unknown_outcome: retry, as e1 claimed it or as a reload made it for e2.
// The configurations are drawn so that they pass the timing model (core/exchange_timing.hpp); a
// second test draws leases below the longest exchange and must find a double execution.
//
// IDEMPROXY_MODEL_SEED and IDEMPROXY_MODEL_TIMELINES override the seed and the count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <random>
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
  milliseconds claimed_at{0};       // when the store ran the claim that won the key
  milliseconds started_at{0};       // request written to the upstream
  milliseconds exchange_end{0};     // its settling write ran (or was given up), the lease left to lapse, or the crash
  core::RoutePolicy policy;         // the route as this exchange claimed it
  bool completed = false;           // a completion reached the store
};

// One client request (a retry of the same logical request) and every delay it will meet.
struct Attempt {
  int id = 0;
  milliseconds arrival{0};
  bool store_unreachable = false;  // the claim never ran (no connection)
  milliseconds claim_runs_after{0};  // INSERT runs this long after sending, <= query_timeout
  bool claim_reply_lost = false;
  milliseconds claim_reply_after{0};  // >= claim_runs_after, <= query_timeout
  bool connect_fails = false;
  milliseconds connect{0};            // <= connect_timeout (x2 over TLS)
  bool upstream_answers = true;       // false: connection lost before any answer
  milliseconds upstream_duration{0};  // how long the upstream works (may exceed upstream.timeout)
  milliseconds write_acquire{0};      // the settling write waits this long for a connection
  milliseconds write_runs_after{0};   // then its statement runs within query_timeout
  bool write_reply_lost = false;
  bool write_never_runs = false;      // the store cannot be reached for it: only background retries remain
  milliseconds retry_every{0};        // background owner-write retries
  int background_losses = 0;          // how many background retries are lost before one lands
  std::optional<milliseconds> crash_at;
};

class Timeline {
 public:
  Timeline(const Setting& setting, const Sabotage& sabotage, std::mt19937_64& random)
      : setting_(setting), sabotage_(sabotage), random_(random), store_(clock_) {}

  // Runs the attempts and any operator release; returns a description of the first violation.
  std::optional<std::string> run(const std::vector<Attempt>& attempts, std::optional<milliseconds> release_at,
                                 const std::vector<milliseconds>& sweeps) {
    for (const Attempt& attempt : attempts) at(attempt.arrival, attempt.id, [this, attempt] { start(attempt); });
    if (release_at) {
      at(*release_at, -1, [this] {
        store_.force_release({kScope, kKey}, [this](StoreError error, milliseconds) {
          if (error == StoreError::ok) released_at_.push_back(clock_.elapsed());
        });
        trace("operator release");
      });
    }
    for (const milliseconds sweep : sweeps) {
      at(sweep, -1, [this] { store_.sweep_expired(100, [](StoreError, std::size_t) {}); });
    }
    while (!events_.empty()) {
      Event event = events_.top();
      events_.pop();
      clock_.set(event.time);
      if (event.attempt >= 0 && crashed(event.attempt, event.time)) continue;
      event.run();
    }
    return check();
  }

  const std::string& log() const { return log_; }

 private:
  static constexpr const char* kScope = "scope";
  static constexpr const char* kKey = "key";
  static constexpr const char* kFingerprint = "v1:fingerprint";

  struct Event {
    milliseconds time;
    std::uint64_t order;  // ties: a random order, so same-millisecond events interleave every way
    int attempt;          // -1: not an exchange's (release, sweep)
    std::function<void()> run;
    bool operator<(const Event& other) const {
      return time != other.time ? time > other.time : order > other.order;
    }
  };

  void at(milliseconds time, int attempt, std::function<void()> run) {
    events_.push(Event{time, random_(), attempt, std::move(run)});
  }

  bool crashed(int attempt, milliseconds time) const {
    const auto it = crash_at_.find(attempt);
    return it != crash_at_.end() && time >= it->second;
  }

  void trace(const std::string& what) { log_ += "  " + std::to_string(clock_.elapsed().count()) + "ms " + what + "\n"; }

  const core::RoutePolicy& policy_at(milliseconds time) const {
    return time >= setting_.reload_at ? setting_.after : setting_.before;
  }

  void start(const Attempt& attempt) {
    if (attempt.crash_at) {
      crash_at_[attempt.id] = *attempt.crash_at;
      at(*attempt.crash_at, -1, [this, id = attempt.id] { trace("#" + std::to_string(id) + "'s proxy crashes"); });
    }
    const core::RoutePolicy policy = policy_at(attempt.arrival);
    const milliseconds sent = clock_.elapsed();
    trace("#" + std::to_string(attempt.id) + " claim sent (" +
          (policy.unknown_outcome == core::UnknownOutcome::retry ? "retry" : "lock") + ", lease " +
          std::to_string(policy.lease.count()) + "ms)");
    if (attempt.store_unreachable) {
      const core::ClaimFailure failure = core::after_claim_failure(StoreError::unavailable, policy);
      EXPECT_EQ(failure.answer, core::ClaimFailureAnswer::unavailable);  // fail_closed routes only
      return;
    }
    at(sent + attempt.claim_runs_after, attempt.id, [this, attempt, policy, sent] {
      store::ClaimRequest request{.scope = kScope, .key = kKey, .fingerprint = kFingerprint,
                                  .owner = owner(attempt.id), .ttl = policy.ttl, .lease = policy.lease,
                                  .take_over_lapsed_lease = policy.unknown_outcome == core::UnknownOutcome::retry};
      if (!request.take_over_lapsed_lease && !sabotage_.forget_unsettled_retention) {
        request.unsettled_retention = policy.unknown_retention;
      }
      const milliseconds claimed_at = clock_.elapsed();
      core::ClaimResult result;
      store_.claim(request, [&result](StoreError error, core::ClaimResult claim) {
        ASSERT_EQ(error, StoreError::ok);
        result = std::move(claim);
      });
      trace("#" + std::to_string(attempt.id) + " claim ran: " + (result.claimed ? "claimed" : "existing record"));
      if (attempt.claim_reply_lost) return;
      // The reply, after the statement ran (at the same millisecond at the earliest).
      at(std::max(clock_.elapsed(), sent + attempt.claim_reply_after), attempt.id,
         [this, attempt, policy, result, claimed_at, sent] {
           const core::Decision decision = core::decide(result, kFingerprint, policy);
           trace("#" + std::to_string(attempt.id) + " decision " + std::string(core::action_name(decision.action)));
           if (decision.action != core::Action::execute) return;
           forward(attempt, policy, sent, claimed_at);
         });
    });
    if (attempt.claim_reply_lost) {
      at(sent + setting_.timeouts.store_query, attempt.id, [this, attempt, policy, sent] {
        const core::ClaimFailure failure = core::after_claim_failure(StoreError::reply_lost, policy);
        EXPECT_EQ(failure.answer, core::ClaimFailureAnswer::unavailable);
        trace("#" + std::to_string(attempt.id) + " claim reply lost: 503");
        if (failure.release_claim) settle_in_background(attempt, policy, core::OwnerWrite::release, sent, 0);
      });
    }
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
      executions_.push_back(Execution{.attempt = attempt.id, .claimed_at = claimed_at, .started_at = clock_.elapsed(),
                                      .exchange_end = milliseconds::max(), .policy = policy, .completed = false});
      trace("#" + std::to_string(attempt.id) + " EXECUTES upstream");
      const milliseconds timeout = setting_.timeouts.upstream;
      if (attempt.upstream_answers && attempt.upstream_duration <= timeout) {
        at(clock_.elapsed() + attempt.upstream_duration, attempt.id, [this, attempt, policy, sent, index] {
          EXPECT_EQ(core::classify_response(200, "", 2, policy), core::Outcome::store);
          settle(attempt, policy, core::OwnerWrite::complete, sent, index);
        });
      } else {
        const milliseconds gives_up = attempt.upstream_answers ? timeout : std::min(timeout, attempt.upstream_duration);
        at(clock_.elapsed() + gives_up, attempt.id, [this, attempt, policy, sent, index] {
          const core::RecordFate fate = core::after_upstream_failure(core::UpstreamFailureKind::outcome_unknown, policy);
          trace("#" + std::to_string(attempt.id) + " upstream outcome unknown: " + std::string(core::record_fate_name(fate)));
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

  // The exchange's own settling write: a pooled connection, then the statement; its reply may be lost.
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
    const milliseconds runs_at = started + attempt.write_acquire + attempt.write_runs_after;
    at(runs_at, attempt.id, [this, attempt, policy, write, execution] {
      const StoreError error = send(attempt.id, policy, write);
      if (error == StoreError::ok && write == core::OwnerWrite::complete && execution) executions_[*execution].completed = true;
      if (execution) end_exchange(*execution);  // the record is settled (or, not_owner, no longer ours)
    });
    if (!attempt.write_reply_lost) return;
    at(started + attempt.write_acquire + setting_.timeouts.store_query, attempt.id, [this, attempt, policy, write, sent] {
      EXPECT_EQ(core::after_owner_write(write, StoreError::reply_lost), core::OwnerWriteNext::retry);
      settle_in_background(attempt, policy, write, sent, 0);
    });
  }

  // Retries of a write whose reply was lost, until one lands or the owner-write horizon passes.
  void settle_in_background(const Attempt& attempt, const core::RoutePolicy& policy, core::OwnerWrite write,
                            milliseconds sent, int tries) {
    const milliseconds next = clock_.elapsed() + attempt.retry_every;
    if (next > sent + core::owner_write_horizon(policy)) return;
    at(next, attempt.id, [this, attempt, policy, write, sent, tries] {
      if (tries < attempt.background_losses) {  // not run at all (store unreachable): try again
        settle_in_background(attempt, policy, write, sent, tries + 1);
        return;
      }
      const StoreError error = send(attempt.id, policy, write);
      trace("#" + std::to_string(attempt.id) + " background " + std::string(core::owner_write_name(write)) + ": " +
            std::string(core::store_error_name(error)));
      if (error == StoreError::ok && write == core::OwnerWrite::complete) {
        for (Execution& execution : executions_) {
          if (execution.attempt == attempt.id) execution.completed = true;
        }
      }
      EXPECT_NE(core::after_owner_write(write, error), core::OwnerWriteNext::retry);
    });
  }

  StoreError send(int attempt, const core::RoutePolicy& policy, core::OwnerWrite write) {
    StoreError answer = StoreError::internal;
    const auto done = [&answer](StoreError error) { answer = error; };
    switch (write) {
      case core::OwnerWrite::complete: {
        store::CompleteRequest request{.scope = kScope, .key = kKey, .owner = owner(attempt),
                                       .state = core::RecordState::completed, .response = {}, .ttl = policy.ttl};
        request.response.status = 200;
        request.response.body = "ok";
        store_.complete(request, done);
        break;
      }
      case core::OwnerWrite::release:
        store_.release({.scope = kScope, .key = kKey, .owner = owner(attempt)}, done);
        break;
      case core::OwnerWrite::mark_unknown:
        store_.mark_unknown({.scope = kScope, .key = kKey, .owner = owner(attempt), .ttl = policy.ttl,
                             .unknown_retention = policy.unknown_retention},
                            done);
        break;
    }
    trace("#" + std::to_string(attempt) + " " + std::string(core::owner_write_name(write)) + " ran: " +
          std::string(core::store_error_name(answer)));
    return answer;
  }

  void end_exchange(std::size_t execution) {
    executions_[execution].exchange_end = std::min(executions_[execution].exchange_end, clock_.elapsed());
  }

  static std::string owner(int attempt) { return "owner-" + std::to_string(attempt); }

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
                 (e1.exchange_end == milliseconds::max() ? std::string("never") : std::to_string(e1.exchange_end.count()) + "ms") +
                 "; #" + std::to_string(e2.attempt) + " claimed at " + std::to_string(e2.claimed_at.count()) +
                 "ms, started at " + std::to_string(e2.started_at.count()) + "ms";
        };
        // e2's claim is what lets it run: taking the key while e1 may still settle it is the fault.
        if (e2.claimed_at <= e1.exchange_end) return describe("a second execution while the first exchange may still run");
        const bool released = std::any_of(released_at_.begin(), released_at_.end(), [&](milliseconds at) {
          return at >= e1.claimed_at && at <= e2.claimed_at;
        });
        if (released) continue;
        if (e2.claimed_at < e1.claimed_at + e1.policy.lease) return describe("a second execution within the first's lease");
        if (e1.completed) {
          if (e2.claimed_at < e1.claimed_at + e1.policy.ttl) return describe("a completed key executed again within its ttl");
          continue;
        }
        // The route as e1 claimed it, or as it is since a reload, asks for a re-run after the lease.
        if (e1.policy.unknown_outcome == core::UnknownOutcome::retry || e2.policy.unknown_outcome == core::UnknownOutcome::retry) {
          continue;
        }
        if (e2.claimed_at < e1.claimed_at + e1.policy.ttl + e1.policy.unknown_retention) {
          return describe("an unknown outcome executed again within ttl + unknown_retention");
        }
      }
    }
    return std::nullopt;
  }

  const Setting& setting_;
  const Sabotage& sabotage_;
  std::mt19937_64& random_;
  SimulatedClock clock_;
  store::MemoryStore store_;
  std::priority_queue<Event> events_;
  std::map<int, milliseconds> crash_at_;
  std::vector<Execution> executions_;
  std::vector<milliseconds> released_at_;
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

Attempt draw_attempt(Draw& draw, const Setting& setting, int id, milliseconds horizon) {
  const core::ExchangeTimeouts& t = setting.timeouts;
  Attempt attempt;
  attempt.id = id;
  attempt.arrival = milliseconds(draw.between(0, horizon.count()));
  attempt.store_unreachable = draw.chance(0.03);
  attempt.claim_runs_after = draw.up_to(t.store_query);
  attempt.claim_reply_lost = draw.chance(0.1);
  attempt.claim_reply_after = attempt.claim_runs_after + draw.up_to(t.store_query - attempt.claim_runs_after);
  const milliseconds connect_bound = t.connect * (t.upstream_tls ? 2 : 1);
  attempt.connect = draw.up_to(connect_bound);
  attempt.connect_fails = draw.chance(0.05);
  if (attempt.connect_fails) attempt.connect = connect_bound;
  attempt.upstream_answers = !draw.chance(0.05);
  attempt.upstream_duration = draw.chance(0.2) ? t.upstream + milliseconds(draw.between(1, 3'000)) : draw.up_to(t.upstream);
  attempt.write_acquire = draw.up_to(t.store_acquire);
  attempt.write_runs_after = draw.up_to(t.store_query);
  attempt.write_reply_lost = draw.chance(0.1);
  attempt.write_never_runs = draw.chance(0.05);
  attempt.retry_every = milliseconds(draw.between(50, 1'000));
  attempt.background_losses = static_cast<int>(draw.between(0, 3));
  if (draw.chance(0.15)) attempt.crash_at = attempt.arrival + milliseconds(draw.between(0, 4'000));
  return attempt;
}

struct Exploration {
  std::uint64_t timelines = 0;
  std::uint64_t executions_twice = 0;  // timelines where the key executed more than once (allowed ones)
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
    const milliseconds horizon =
        std::max(setting.before.ttl + setting.before.unknown_retention, setting.after.ttl + setting.after.unknown_retention) +
        2'000ms;
    std::vector<Attempt> attempts;
    const int count = static_cast<int>(draw.between(2, 5));
    for (int id = 0; id < count; ++id) attempts.push_back(draw_attempt(draw, setting, id, horizon));
    std::optional<milliseconds> release_at;
    if (draw.chance(0.3)) release_at = milliseconds(draw.between(0, horizon.count()));
    std::vector<milliseconds> sweeps;
    for (int i = static_cast<int>(draw.between(0, 3)); i > 0; --i) sweeps.push_back(milliseconds(draw.between(0, horizon.count())));

    Timeline timeline(setting, sabotage, random);
    if (auto violation = timeline.run(attempts, release_at, sweeps)) {
      result.violation = *violation + "\n" + timeline.log();
    }
  }
  return result;
}

// ---- The tests ----------------------------------------------------------------------------------

TEST(TimingModel, NoTimelineExecutesAKeyTwiceWhileTheRulesHold) {
  const std::uint64_t seed = env_or("IDEMPROXY_MODEL_SEED", 20261125);
  const std::uint64_t timelines = env_or("IDEMPROXY_MODEL_TIMELINES", 100'000);
  const Exploration result = explore(seed, timelines, Sabotage{});
  std::cout << "[ timing model ] seed " << seed << ": " << result.timelines << " timelines explored\n";
  EXPECT_FALSE(result.violation) << "seed " << seed << ", timeline " << result.timelines << ": " << *result.violation;
  EXPECT_EQ(result.timelines, timelines);
}

// A sabotaged rule must be caught: returns the violation found, printed as the evidence.
void expect_caught(const Sabotage& sabotage, std::string_view what, std::string_view violation_kind) {
  const std::uint64_t seed = env_or("IDEMPROXY_MODEL_SEED", 20261125);
  const Exploration result = explore(seed, 20'000, sabotage);
  ASSERT_TRUE(result.violation) << what << ": the checker found nothing in " << result.timelines << " timelines";
  std::cout << "[ timing model ] " << what << ": double execution found after " << result.timelines << " timelines:\n"
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

}  // namespace
}  // namespace idem
