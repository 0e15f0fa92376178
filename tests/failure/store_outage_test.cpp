// Postgres goes away (pg_ctl stop -m immediate, a crash as far as the proxy can tell) and comes
// back, on a private cluster so no other test loses its database. The proxy is never restarted.
#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class StoreOutage : public FailureTest {};

// Log lines holding both `first` and `second`.
int count_occurrences(const std::string& logs, std::string_view first, std::string_view second) {
  int count = 0;
  std::size_t start = 0;
  while (start < logs.size()) {
    const std::size_t end = std::min(logs.find('\n', start), logs.size());
    const std::string_view line(logs.data() + start, end - start);
    if (line.find(first) != std::string_view::npos && line.find(second) != std::string_view::npos) ++count;
    start = end + 1;
  }
  return count;
}

// The claim deadline: PG_CONNECT_TIMEOUT and PG_QUERY_TIMEOUT are 1 s and PG_ACQUIRE_TIMEOUT 500 ms
// in the rig's config, plus 1 s for scheduling on a loaded test machine.
constexpr auto kClaimDeadline = 2000ms;

struct Exchange {
  std::string route;
  std::string key;
  Clock::time_point sent_at;
  Clock::time_point answered_at;
  HttpResponse response;
};

// Client threads issuing fresh logical requests on /lock and /open, alternately, until stopped.
class SteadyLoad {
 public:
  SteadyLoad(std::uint16_t port, int threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, port, t] {
        for (int n = 0; !stop_.load(); ++n) {
          Exchange exchange;
          exchange.route = (n + t) % 2 == 0 ? "lock" : "open";
          exchange.key = unique_key("outage-" + exchange.route);
          exchange.sent_at = Clock::now();
          exchange.response =
              send(port, keyed_post("/" + exchange.route, exchange.key).with("X-Test-Delay-Ms", "20"), 10s);
          exchange.answered_at = Clock::now();
          {
            std::lock_guard lock(mutex_);
            exchanges_.push_back(std::move(exchange));
          }
          // Paced: a failing store answers at once, and the test retries every key later.
          std::this_thread::sleep_for(40ms);
        }
      });
    }
  }
  ~SteadyLoad() { stop(); }

  std::vector<Exchange> stop() {
    stop_.store(true);
    for (auto& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    std::lock_guard lock(mutex_);
    return exchanges_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<Exchange> exchanges_;
  std::vector<std::thread> threads_;
};

TEST_F(StoreOutage, PostgresStoppedMidLoadFailClosed503FailOpenForwardsThenRecoversWithoutDuplicates) {
  PrivatePostgres& postgres = start_private_postgres();
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", "6s"}}, postgres.dsn()));
  const std::uint16_t port = rig.proxy_port();

  const std::string old_key = unique_key("before-outage");
  const HttpResponse old_first = send(port, keyed_post("/lock", old_key));
  ASSERT_EQ(old_first.status, 200) << describe(old_first);

  SteadyLoad load(port, 4);
  std::this_thread::sleep_for(700ms);
  const auto stopped_at = Clock::now();
  postgres.stop_immediate();
  std::this_thread::sleep_for(2500ms);
  postgres.start();
  const auto restarted_at = Clock::now();

  // Recovery: the same proxy process serves a new key again, within the pool's reconnect backoff.
  const std::string new_key = unique_key("after-outage");
  const HttpResponse recovered = send_while_refused(port, keyed_post("/lock", new_key), restarted_at + 15s);
  const long long recovered_ms = elapsed_ms(restarted_at);
  std::this_thread::sleep_for(500ms);
  const std::vector<Exchange> exchanges = load.stop();
  EXPECT_EQ(rig.proxy_starts(), 1);
  ASSERT_TRUE(rig.proxy().running()) << "the proxy died with its database";

  EXPECT_EQ(recovered.status, 200) << "no recovery " << elapsed_ms(restarted_at)
                                   << " ms after the restart: " << describe(recovered);
  EXPECT_FALSE(is_replay(recovered));
  EXPECT_EQ(rig.upstream_count(new_key), 1u);
  // Each worker's pool reconnects on its own backoff: a request that lands on one still
  // reconnecting gets the 503 + Retry-After a client retries on (never a second execution).
  const HttpResponse old_again = send_while_refused(port, keyed_post("/lock", old_key), restarted_at + 20s);
  EXPECT_EQ(old_again.status, 200) << describe(old_again);
  EXPECT_TRUE(is_replay(old_again)) << "a record from before the outage is not replayed: " << describe(old_again);
  EXPECT_EQ(old_again.body, old_first.body);
  EXPECT_EQ(rig.upstream_count(old_key), 1u);

  int closed_refusals = 0;
  int open_unchecked = 0;
  int open_reply_lost = 0;
  std::vector<std::string> refused_open_keys;
  long long slowest_refusal_ms = 0;
  std::vector<std::string> refused_keys;
  std::vector<const Exchange*> stored;
  for (const Exchange& exchange : exchanges) {
    const HttpResponse& response = exchange.response;
    const auto latency = std::chrono::duration_cast<std::chrono::milliseconds>(exchange.answered_at - exchange.sent_at);
    ASSERT_TRUE(response.ok()) << exchange.route << " " << response.error;
    if (exchange.route == "open") {
      // fail_open: forwarded, protected or not, while the store cannot be reached. A claim whose
      // reply was lost when Postgres died may stand, so it is never forwarded unprotected: 503,
      // nothing executed, and the fenced release frees the key for the retry below.
      if (response.status == 503) {
        ++open_reply_lost;
        EXPECT_EQ(problem_slug(response), "store-unavailable") << describe(response);
        EXPECT_EQ(rig.upstream_count(exchange.key), 0u) << "a 503 called the upstream";
        refused_open_keys.push_back(exchange.key);
        continue;
      }
      EXPECT_EQ(response.status, 200) << describe(response);
      if (is_unchecked(response)) {
        ++open_unchecked;
        EXPECT_EQ(rig.upstream_count(exchange.key), 1u);
      }
      continue;
    }
    if (response.status == 503) {
      ++closed_refusals;
      slowest_refusal_ms = std::max<long long>(slowest_refusal_ms, latency.count());
      EXPECT_EQ(problem_slug(response), "store-unavailable") << describe(response);
      EXPECT_GE(retry_after_seconds(response).value_or(0), 1) << describe(response);
      EXPECT_LT(latency, kClaimDeadline) << "a fail_closed refusal took " << latency.count() << " ms";
      EXPECT_EQ(rig.upstream_count(exchange.key), 0u) << "fail_closed called the upstream";
      refused_keys.push_back(exchange.key);
    } else {
      EXPECT_EQ(response.status, 200) << describe(response);
      EXPECT_FALSE(is_unchecked(response)) << "a fail_closed route forwarded unprotected";
      stored.push_back(&exchange);
    }
  }
  EXPECT_GT(closed_refusals, 0) << "the outage never reached a claim";
  EXPECT_GT(open_unchecked, 0) << "fail_open never forwarded without the store";

  // No logical request runs twice: every answered key replays (or, if its completion write was
  // lost for good, is an unknown outcome); every refused key was never executed and runs now.
  int replays = 0;
  for (const Exchange* exchange : stored) {
    const HttpResponse again = send_until_settled(port, keyed_post("/lock", exchange->key), 5s);
    const std::string slug = problem_slug(again);
    if (is_replay(again)) {
      ++replays;
      EXPECT_EQ(again.body, exchange->response.body);
    } else {
      EXPECT_TRUE(slug == "outcome-unknown" || slug == "request-in-flight") << describe(again);
      EXPECT_GT(exchange->answered_at, stopped_at) << "completed before the outage, yet not replayed";
    }
    EXPECT_EQ(rig.upstream_count(exchange->key), 1u) << "executed twice";
  }
  // No key is left unknown unless the upstream itself received its request (its own count, not
  // the proxy's view): a claim whose reply died with Postgres was never forwarded, and is freed.
  int unknown_keys = 0;
  for (const Exchange& exchange : exchanges) {
    const RecordInspection record = rig.inspect(exchange.route, exchange.key);
    if (record.state != "unknown") continue;
    ++unknown_keys;
    EXPECT_GE(rig.upstream_count(exchange.key), 1u) << "locked as unknown, yet never executed: " << record.output;
  }
  const std::string logs = rig.proxy_logs();
  const auto lost_claim_replies =
      count_occurrences(logs, "\"event\":\"store_unavailable\",\"route\"", "\"error\":\"reply_lost\"");
  for (const auto& [route, keys] :
       {std::pair{std::string("/lock"), refused_keys}, std::pair{std::string("/open"), refused_open_keys}}) {
    for (const std::string& key : keys) {
      const HttpResponse retried = send(port, keyed_post(route, key));
      EXPECT_EQ(retried.status, 200) << route << " " << describe(retried);
      EXPECT_FALSE(is_replay(retried));
      EXPECT_FALSE(is_unchecked(retried));
      EXPECT_EQ(rig.upstream_count(key), 1u);
    }
  }
  std::cout << "[ outage   ] " << exchanges.size() << " requests; fail_closed: " << stored.size() << " stored ("
            << replays << " replayed after), " << closed_refusals << " refused (slowest " << slowest_refusal_ms
            << " ms); fail_open unchecked: " << open_unchecked << ", 503 after a lost claim reply: " << open_reply_lost
            << "; recovered " << recovered_ms
            << " ms after the restart; lost claim replies caught: " << lost_claim_replies
            << "; keys left unknown: " << unknown_keys << "\n";
}

TEST_F(StoreOutage, PostgresLostBeforeTheCompletionWriteClientGetsTheResponseAndTheRetryReplaysIt) {
  PrivatePostgres& postgres = start_private_postgres();
  constexpr auto kLease = 12s;
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "3s"}, {"LEASE", "12s"}}, postgres.dsn()));
  const std::string key = unique_key("completion-lost");

  const auto sent_at = Clock::now();
  auto first = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Delay-Ms", "1500"));
  });
  const auto forward_deadline = sent_at + 1s;
  while (rig.upstream_count(key) == 0 && Clock::now() < forward_deadline) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(rig.upstream_count(key), 1u) << "the request never reached the upstream";
  postgres.stop_immediate();
  const auto stopped_at = Clock::now();

  // The upstream answers while Postgres is down: the completion write cannot succeed.
  const HttpResponse answer = first.get();
  EXPECT_EQ(answer.status, 200) << describe(answer);
  EXPECT_FALSE(is_replay(answer));
  EXPECT_GT(execution_of(answer), 0u) << "not the upstream's response: " << describe(answer);
  EXPECT_NE(rig.proxy_logs().find("\"complete_failed\""), std::string::npos) << "the completion write did not fail";

  postgres.start();
  std::cout << "[ postgres ] down for " << elapsed_ms(stopped_at) << " ms\n";

  // Retries meet the in-flight record (409) until the background write lands, then the replay.
  const auto lease_left = std::chrono::duration_cast<std::chrono::milliseconds>(sent_at + kLease + 1s - Clock::now());
  const HttpResponse retried = send_until_settled(rig.proxy_port(), keyed_post("/lock", key), lease_left);
  EXPECT_EQ(retried.status, 200) << describe(retried);
  EXPECT_TRUE(is_replay(retried)) << describe(retried);
  EXPECT_EQ(retried.body, answer.body);
  EXPECT_EQ(execution_of(retried), execution_of(answer));
  EXPECT_EQ(rig.upstream_count(key), 1u);
  EXPECT_NE(rig.proxy_logs().find("\"complete_recovered\""), std::string::npos);
  EXPECT_EQ(rig.inspect("lock", key).state, "completed");
}

// KNOWN FAILING (reported to the lead): the proxy's sessions inherit the server's
// synchronous_commit, and with `off` (deploy/local-env.sh sets it; a common throughput setting)
// the claim and the completion are acknowledged before their WAL is flushed. A Postgres crash
// right after the client got its 200 then forgets the record: the retry executes again (count 2)
// or, when only the completion was lost, meets an unknown outcome instead of the replay. The
// proxy has to ask for synchronous_commit = on in its own sessions; this test passes once it does.
TEST_F(StoreOutage, AnsweredRequestSurvivesAPostgresCrashWhateverTheServersCommitSetting) {
  PrivatePostgres& postgres = start_private_postgres(CommitMode::asynchronous);
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", "5s"}}, postgres.dsn()));
  // The WAL writer flushes asynchronous commits within 3 x wal_writer_delay (600 ms): by now the
  // schema is on disk, and only the requests below are at stake.
  std::this_thread::sleep_for(1s);

  constexpr int kRounds = 3;
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = unique_key("crash-after-answer");
    const HttpResponse first = send(rig.proxy_port(), keyed_post("/lock", key));
    ASSERT_EQ(first.status, 200) << describe(first);
    postgres.stop_immediate();
    postgres.start();
    const HttpResponse retried = send_until_settled(rig.proxy_port(), keyed_post("/lock", key), 10s);
    EXPECT_EQ(rig.upstream_count(key), 1u) << "round " << round << ": executed again after a Postgres crash";
    EXPECT_TRUE(is_replay(retried)) << "round " << round << ": " << describe(retried);
  }
}

}  // namespace
}  // namespace idem::test::failure
