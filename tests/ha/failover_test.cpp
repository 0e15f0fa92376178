// idemproxy and idemrelay on a real HA Postgres (a pg_auto_failover formation the test starts:
// monitor + two data nodes, support/ha_formation.hpp), under steady load with retries, while the
// primary is killed (-9, keeper and postgres) or switched over. Afterwards: at most one execution
// per logical request, every acknowledged response replays byte-identically, and the relay lost no
// outbox event, published none twice and kept the order of each aggregate. With asynchronous
// replication the losses are real; they are counted and printed, not failed on.
//
// Each run prints one line starting "HA figures" (failover time, 503s, duplicates, lost replays,
// relay events lost/duplicated). ctest keeps it in Testing/Temporary/LastTest.log.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "failure/failure_requests.hpp"
#include "failure/proxy_rig.hpp"
#include "ha/ha_load.hpp"
#include "relay/relay_env.hpp"
#include "support/blocking_pg.hpp"
#include "support/eventually.hpp"
#include "support/ha_formation.hpp"
#include "support/ports.hpp"
#include "support/random_hex.hpp"
#include "support/redis_client.hpp"
#include "support/temp_dir.hpp"

namespace idem::test::ha {
namespace {

using namespace std::chrono_literals;

constexpr int kClientThreads = 4;
constexpr int kAggregates = 4;
constexpr auto kOutboxPause = 25ms;
constexpr auto kLoadBeforeDisruption = 2500ms;
// After the disruption the load goes on until requests succeed again, and this long after that.
constexpr auto kLoadAfterRecovery = 2s;
constexpr auto kRecoveryBound = 45s;
constexpr auto kFailoverBound = 60s;
constexpr const char* kWarning = "store_replication_asynchronous";
constexpr const char* kGauge = "idemproxy_store_synchronous_replication";

enum class Disruption { kill_primary, switchover };

struct Scenario {
  std::string name;
  Disruption disruption = Disruption::kill_primary;
  bool asynchronous = false;
};

long long ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// What one run measured: printed on one line, asserted on by each test.
struct Figures {
  long long disruption_ms = 0;   // kill -> formation has a new writable primary (or switchover's duration)
  long long failover_ms = -1;    // kill -> first 2xx to a request sent after it (-1 for a switchover)
  long long refusal_window_ms = 0;  // first -> last 503
  long long outage_ms = 0;       // longest time without a 200 answer, from the disruption on
  int refusals = 0;              // 503 store-unavailable answers (every attempt)
  int requests = 0;              // logical requests
  int acknowledged = 0;          // final 200
  int acknowledged_before = 0;   // ... answered before the disruption
  int outcome_unknown = 0;       // final 502 outcome-unknown
  int unknown_not_executed = 0;  // ... whose upstream never received the request
  int unsettled = 0;             // no final answer within the bound
  int transport_errors = 0;
  int wrong_answers = 0;
  int duplicates = 0;            // executions beyond the first, over all keys
  int lost_replays = 0;          // acknowledged, yet no identical replay afterwards
  int lost_replays_before = 0;   // ... of those acknowledged before the disruption
  int unstored_after = 0;        // acknowledged after the disruption, completion not stored (no replay, no re-execution)
  int relay_acknowledged = 0;    // outbox INSERTs acknowledged
  int relay_insert_retries = 0;  // INSERTs that failed and were tried again (on the new primary)
  int relay_lost = 0;            // acknowledged, never in the stream
  int relay_duplicated = 0;      // stream entries beyond the first per event
  int relay_out_of_order = 0;    // aggregates whose stream is out of order
  int relay_entries = 0;
  int relay_phantoms = 0;        // stream entries whose outbox row is gone after the failover

  std::string line(const std::string& scenario) const {
    std::ostringstream out;
    out << "HA figures [" << scenario << "]: failover_ms=" << failover_ms << " new_primary_ms=" << disruption_ms
        << " outage_ms=" << outage_ms << " 503s=" << refusals << " (window " << refusal_window_ms << " ms) requests=" << requests
        << " acknowledged=" << acknowledged << " (before " << acknowledged_before << ") duplicates=" << duplicates
        << " lost_replays=" << lost_replays << " (acknowledged before: " << lost_replays_before
        << ") unstored_after=" << unstored_after << " outcome_unknown=" << outcome_unknown << " (not executed: " << unknown_not_executed << ")"
        << " unsettled=" << unsettled << " transport_errors=" << transport_errors << " wrong=" << wrong_answers
        << " | relay events=" << relay_acknowledged << " entries=" << relay_entries << " lost=" << relay_lost
        << " duplicated=" << relay_duplicated << " out_of_order=" << relay_out_of_order
        << " phantoms=" << relay_phantoms << " insert_retries=" << relay_insert_retries;
    return out.str();
  }
};

class HaFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>("idem-ha-test");
    formation_ = std::make_unique<HaFormation>();
    redis_ = std::make_unique<RedisClient>(suite_redis_port());
  }

  void TearDown() override {
    if (relay_ && relay_->running()) relay_->terminate(10s);
    if (HasFailure()) {
      if (rig_) std::cerr << rig_->diagnostics();
      if (relay_) std::cerr << "=== idemrelay ===\n" << relay_->describe(6144) << "\n";
      if (formation_) std::cerr << formation_->describe();
    }
    if (redis_ && !prefix_.empty()) {
      std::vector<std::string> del = {"DEL"};
      for (std::string& key : redis_->keys(prefix_ + "*")) del.push_back(std::move(key));
      if (del.size() > 1) redis_->command(del);
    }
    rig_.reset();
    relay_.reset();
    formation_.reset();  // stops every keeper and postgres, by PID
  }

  // The proxy (its schema migrated by the rig) and the relay (idemrelay --migrate), both on the
  // formation's multi-host DSN.
  void start_services() {
    admin_port_ = free_port();
    failure::RigOptions options = failure::rig_options(
        {{"LEASE", "5s"}, {"UPSTREAM_TIMEOUT", "1s"}, {"ADMIN_LISTEN", "127.0.0.1:" + std::to_string(admin_port_)}},
        formation_->dsn());
    rig_ = std::make_unique<failure::ProxyRig>(std::move(options));
    rig_->start();

    prefix_ = "ha" + random_hex(10);
    relay::RelaySettings settings;
    settings.dsn = formation_->dsn();
    settings.redis_port = suite_redis_port();
    settings.stream_prefix = prefix_;
    const relay::RelayRunner runner(dir_->path(), settings);
    const RunResult migrated = runner.run({"--migrate"});
    ASSERT_EQ(migrated.exit_status, 0) << "idemrelay --migrate:\n" << migrated.stdout_text << migrated.stderr_text;
    relay_.emplace(runner.start("idemrelay"));
  }

  // idemproxy_store_synchronous_replication on /metrics; nullopt when absent.
  std::optional<double> replication_gauge() {
    const std::string text = send(admin_port_, HttpRequest::get("/metrics"), 5s).body;
    const std::string prefix = std::string(kGauge) + " ";
    for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
      if (at != 0 && text[at - 1] != '\n') continue;
      return std::stod(text.substr(at + prefix.size(), text.find('\n', at) - at - prefix.size()));
    }
    return std::nullopt;
  }
  static std::string show(std::optional<double> value) {
    if (!value) return "absent";
    std::ostringstream out;
    out << *value;
    return out.str();
  }

  // Every acknowledged request once more (a few threads): identical replay, or not.
  void check_replays(const std::vector<LogicalRequest>& requests, Clock::time_point disrupted_at, Figures& figures) {
    std::vector<const LogicalRequest*> acknowledged;
    for (const LogicalRequest& request : requests) {
      if (request.settled && request.final_response.status == 200) acknowledged.push_back(&request);
    }
    std::mutex mutex;
    std::vector<std::string> problems;
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kClientThreads; ++t) {
      threads.emplace_back([&] {
        for (std::size_t i = next++; i < acknowledged.size(); i = next++) {
          const LogicalRequest& request = *acknowledged[i];
          const bool before = request.answered_at < disrupted_at;
          const HttpResponse again =
              failure::send_until_settled(rig_->proxy_port(), failure::keyed_post("/lock", request.key), 12s);
          const bool identical = again.status == request.final_response.status && failure::is_replay(again) &&
                                 again.body == request.final_response.body &&
                                 again.header("X-Execution") == request.final_response.header("X-Execution");
          std::lock_guard lock(mutex);
          if (identical) continue;
          const std::string slug = failure::problem_slug(again);
          const bool executed_again = again.status == 200 && !failure::is_replay(again);
          if (!before && !executed_again && (slug == "outcome-unknown" || slug == "request-in-flight")) {
            // Answered while the store was failing over: the answer went out, its completion write
            // did not reach the store in time. Never a second execution (counted below).
            ++figures.unstored_after;
            continue;
          }
          ++figures.lost_replays;
          if (before) ++figures.lost_replays_before;
          if (problems.size() < 5) {
            problems.push_back(request.key + (before ? " (acknowledged before)" : " (acknowledged after)") +
                               ": first " + describe(request.final_response, 200) + "\nnow " + describe(again, 200));
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    for (const std::string& problem : problems) std::cout << "lost replay: " << problem << "\n";
  }

  // What reached the stream against what the writer had acknowledged.
  void audit_relay(const std::vector<OutboxEvent>& acknowledged, BlockingPg& client, Figures& figures) {
    const std::vector<relay::StreamEntry> entries = relay::read_stream(*redis_, prefix_ + ".order");
    figures.relay_entries = static_cast<int>(entries.size());
    std::map<OutboxEvent, int> copies;
    std::map<std::string, int> last_n;
    std::set<std::string> disordered;
    for (const relay::StreamEntry& entry : entries) {
      const boost::json::value payload = boost::json::parse(entry.fields.at("payload"));
      const OutboxEvent event{entry.fields.at("aggregate_id"), static_cast<int>(payload.at("n").to_number<std::int64_t>())};
      ++copies[event];
      auto [it, inserted] = last_n.try_emplace(event.aggregate_id, event.n);
      if (!inserted) {
        if (event.n <= it->second) disordered.insert(event.aggregate_id);
        it->second = std::max(it->second, event.n);
      }
    }
    for (const auto& [event, count] : copies) figures.relay_duplicated += count - 1;
    for (const OutboxEvent& event : acknowledged) {
      if (copies.find(event) == copies.end()) ++figures.relay_lost;
    }
    // Published from the old primary, then gone with the WAL it never shipped.
    std::set<OutboxEvent> rows;
    for (const PgRow& row : client.query("SELECT aggregate_id, payload->>'n' FROM outbox")) {
      rows.insert(OutboxEvent{row.at(0).value_or(""), std::stoi(row.at(1).value_or("0"))});
    }
    for (const auto& [event, count] : copies) {
      if (rows.find(event) == rows.end()) ++figures.relay_phantoms;
    }
    figures.relay_out_of_order = static_cast<int>(disordered.size());
  }

  // The whole run: load, disruption, recovery, then the checks every scenario shares. The
  // scenario's own assertions are the caller's.
  Figures run(const Scenario& scenario) {
    Figures figures;
    const std::optional<int> first_primary = formation_->primary();
    if (!first_primary) {
      ADD_FAILURE() << "no primary: " << formation_->describe_states();
      return figures;
    }
    const std::string standby_names = formation_->synchronous_standby_names(*first_primary);
    std::cout << "[" << scenario.name << "] synchronous_standby_names on the primary: '" << standby_names << "'\n";
    if (scenario.asynchronous) {
      EXPECT_EQ(standby_names, "") << "make_asynchronous left a quorum";
    } else {
      EXPECT_NE(standby_names, "") << "pg_auto_failover did not set up synchronous replication";
    }

    OutboxWriter writer(formation_->dsn() + "&connect_timeout=2", prefix_, kAggregates, kOutboxPause);
    RequestLoad load(rig_->proxy_port(), "/lock", scenario.name, kClientThreads);
    std::this_thread::sleep_for(kLoadBeforeDisruption);

    Clock::time_point disrupted_at;
    std::optional<Clock::time_point> killed_at;
    int old_primary = *first_primary;
    if (scenario.disruption == Disruption::kill_primary) {
      if (scenario.asynchronous) {
        // Asynchronous replication on loopback lags by microseconds; a loaded network or standby
        // by much more. The last second of WAL is held back from the standby, and then lost.
        formation_->pause_wal_sender();
        std::this_thread::sleep_for(1s);
      }
      disrupted_at = Clock::now();
      old_primary = formation_->kill_primary();
      // Every process of the node is dead from here on (the listing and the signals took a moment).
      killed_at = Clock::now();
    } else {
      disrupted_at = Clock::now();
      formation_->switchover();
    }
    const std::optional<int> new_primary = formation_->wait_for_new_primary(old_primary, kFailoverBound);
    figures.disruption_ms = ms_between(disrupted_at, Clock::now());
    EXPECT_TRUE(new_primary.has_value()) << "no failover: " << formation_->describe_states();

    // Load goes on until requests sent after the disruption succeed, and a while longer.
    Clock::time_point first_success{};
    const Clock::time_point down_from = killed_at.value_or(disrupted_at);
    const bool recovered = eventually([&] { return load.answered_since(down_from, &first_success); }, kRecoveryBound, 50ms);
    if (recovered) {
      // A switchover keeps serving until the old primary is demoted: only the outage tells.
      if (killed_at) figures.failover_ms = ms_between(*killed_at, first_success);
      std::this_thread::sleep_for(kLoadAfterRecovery);
    }
    const std::vector<LogicalRequest> requests = load.stop();
    const std::vector<OutboxEvent> events = writer.stop(&figures.relay_insert_retries);
    EXPECT_TRUE(recovered) << "no request succeeded within " << kRecoveryBound.count() << " s of the disruption";
    EXPECT_TRUE(rig_->proxy().running()) << "idemproxy died";
    EXPECT_TRUE(relay_->running()) << "idemrelay died";

    std::optional<Clock::time_point> first_refusal;
    std::optional<Clock::time_point> last_refusal;
    for (const LogicalRequest& request : requests) {
      ++figures.requests;
      figures.refusals += request.refusals;
      figures.transport_errors += request.transport_errors;
      figures.wrong_answers += request.wrong;
      if (request.wrong > 0) std::cout << "wrong answer to " << request.key << ": " << request.wrong_answer << "\n";
      for (const auto& at : request.refused_at) {
        if (!first_refusal || at < *first_refusal) first_refusal = at;
        if (!last_refusal || at > *last_refusal) last_refusal = at;
      }
      if (!request.settled) {
        ++figures.unsettled;
        continue;
      }
      if (request.final_response.status == 200) {
        ++figures.acknowledged;
        if (request.answered_at < disrupted_at) ++figures.acknowledged_before;
      } else {
        ++figures.outcome_unknown;
      }
    }
    if (first_refusal) figures.refusal_window_ms = ms_between(*first_refusal, *last_refusal);
    std::vector<Clock::time_point> successes{disrupted_at};
    for (const LogicalRequest& request : requests) {
      if (request.settled && request.final_response.status == 200 && request.answered_at > disrupted_at) {
        successes.push_back(request.answered_at);
      }
    }
    std::sort(successes.begin(), successes.end());
    for (std::size_t i = 1; i < successes.size(); ++i) {
      figures.outage_ms = std::max(figures.outage_ms, ms_between(successes[i - 1], successes[i]));
    }

    check_replays(requests, disrupted_at, figures);
    // Executions per key, after the replay pass (which executes again whatever the store lost).
    for (const LogicalRequest& request : requests) {
      const std::uint64_t executions = rig_->upstream_count(request.key);
      if (executions > 1) figures.duplicates += static_cast<int>(executions - 1);
      const bool unknown = request.settled && failure::problem_slug(request.final_response) == "outcome-unknown";
      if (unknown && executions == 0) ++figures.unknown_not_executed;
    }

    // The relay drains the outbox on the new primary; then the stream is compared with the writer.
    figures.relay_acknowledged = static_cast<int>(events.size());
    BlockingPg client(formation_->dsn() + "&connect_timeout=2");
    const bool drained = eventually(
        [&] { return client.scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0; }, 30s, 100ms);
    EXPECT_TRUE(drained) << "the relay did not drain the outbox on the new primary";
    audit_relay(events, client, figures);

    std::cout << figures.line(scenario.name) << std::endl;
    // With one node left pg_auto_failover runs the new primary alone (wait_primary, no synchronous
    // standby) until the old one rejoins: the proxy says so.
    std::cout << "[" << scenario.name << "] after: " << formation_->describe_states() << "; " << kGauge << " "
              << show(replication_gauge()) << std::endl;

    // Broken whatever the replication mode: a hang, a crash, an answer no client should get.
    EXPECT_EQ(figures.unsettled, 0) << "logical requests without a final answer";
    EXPECT_EQ(figures.transport_errors, 0) << "requests without an HTTP answer (a hang or a crash)";
    EXPECT_EQ(figures.wrong_answers, 0) << "answers other than 200, 503 store-unavailable, 409 request-in-flight, 502 outcome-unknown";
    EXPECT_GT(figures.acknowledged_before, 0);
    return figures;
  }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<HaFormation> formation_;
  std::unique_ptr<RedisClient> redis_;
  std::unique_ptr<failure::ProxyRig> rig_;
  std::optional<Process> relay_;
  std::string prefix_;
  std::uint16_t admin_port_ = 0;
};

// a. Synchronous replication (pg_auto_failover's default quorum): nothing acknowledged is lost.
TEST_F(HaFailover, KillPrimarySynchronousLosesNothingAndRunsNothingTwice) {
  start_services();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_TRUE(eventually([&] { return replication_gauge() == 1.0; }, 5s))
      << kGauge << " is " << show(replication_gauge()) << " on a synchronous formation";
  EXPECT_EQ(rig_->proxy_logs().find(kWarning), std::string::npos) << "warned about asynchronous replication on a synchronous formation";
  const Figures figures = run({"failover-sync", Disruption::kill_primary, false});
  EXPECT_GT(figures.refusals, 0) << "fail_closed never answered 503 during the failover";
  EXPECT_EQ(figures.duplicates, 0) << "a logical request executed twice";
  EXPECT_EQ(figures.lost_replays, 0) << "an acknowledged response does not replay";
  EXPECT_EQ(figures.relay_lost, 0);
  EXPECT_EQ(figures.relay_duplicated, 0);
  EXPECT_EQ(figures.relay_out_of_order, 0);
  EXPECT_EQ(figures.relay_phantoms, 0) << "the stream holds events the outbox lost";
  // The new primary stands alone (its standby was killed): a commit it acknowledges now has no
  // copy, and the gauge must say so within seconds, not at the next minute.
  EXPECT_TRUE(eventually([&] { return replication_gauge() == 0.0; }, 15s))
      << kGauge << " is " << show(replication_gauge()) << " on a primary without a standby";
}

// b. Asynchronous replication: the window is real. Losses are counted and printed, not failed on;
//    the proxy must have warned about them.
TEST_F(HaFailover, KillPrimaryAsynchronousWarnsAndCountsWhatIsLost) {
  formation_->make_asynchronous();
  start_services();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_TRUE(eventually([&] { return rig_->proxy_logs().find(kWarning) != std::string::npos; }, 5s))
      << "no " << kWarning << " warning in the proxy's log";
  EXPECT_TRUE(eventually([&] { return replication_gauge() == 0.0; }, 5s)) << kGauge << " is " << show(replication_gauge());
  const Figures figures = run({"failover-async", Disruption::kill_primary, true});
  std::cout << "[failover-async] lost: " << figures.lost_replays << " replays (" << figures.lost_replays_before
            << " acknowledged before the kill), " << figures.duplicates << " re-executions, " << figures.relay_lost
            << " relay events lost, " << figures.relay_duplicated << " published twice, " << figures.relay_phantoms
            << " published and then gone from the outbox" << std::endl;
}

// c. Planned switchover under load: 503s at most, nothing run twice, every replay intact.
TEST_F(HaFailover, SwitchoverUnderLoadOnlyRefusesAndKeepsEverything) {
  start_services();
  ASSERT_FALSE(HasFatalFailure());
  const Figures figures = run({"switchover", Disruption::switchover, false});
  EXPECT_EQ(figures.duplicates, 0);
  EXPECT_EQ(figures.lost_replays, 0);
  EXPECT_EQ(figures.outcome_unknown, 0);
  EXPECT_EQ(figures.unstored_after, 0) << "an answer whose completion never reached the store";
  EXPECT_EQ(figures.relay_lost, 0);
  EXPECT_EQ(figures.relay_duplicated, 0);
  EXPECT_EQ(figures.relay_out_of_order, 0);
  EXPECT_EQ(figures.relay_phantoms, 0) << "the stream holds events the outbox lost";
}

}  // namespace
}  // namespace idem::test::ha
