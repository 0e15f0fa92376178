// Lost replies: a FaultProxy between idemproxy and Postgres (or Redis) swallows the answer to one
// chosen statement or command, after the server executed it, then resets or hangs the connection.
// The promise under test: whatever the store did, a logical request executes at most once, the
// client's answer says what happened, and the key heals by itself (no operator): a claim that was
// never forwarded frees its key, a completion that committed is not reported lost.
//
// Statements are told apart by their parameters, which travel as raw bytes in the Bind message
// (prepared and unnamed alike): only the claim carries the fingerprint ("v2:...", after the key); the owner
// writes (complete, release, mark_unknown) carry scope, key and owner, and complete also its
// state ("completed"). Every key is unique to its test.
#include <atomic>
#include <cstdlib>
#include <future>
#include <regex>
#include <set>
#include <thread>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/env.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/proxy_fixture.hpp"
#include "support/redis_client.hpp"
#include "support/silent_partition.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using AfterLoss = FaultProxy::AfterLoss;

bool has(std::string_view request, std::string_view needle) { return request.find(needle) != std::string_view::npos; }

// How many times `bytes` holds a claim of `key`: in a claim's Bind the fingerprint ("v2:...")
// follows the key (after its 4-byte length); in an owner write the owner token does. (The scope,
// "<route>/v2:..." on a host-scoped route, comes before the key in both.)
std::size_t claims_in(std::string_view bytes, std::string_view key) {
  std::size_t claims = 0;
  for (std::size_t at = bytes.find(key); at != std::string_view::npos; at = bytes.find(key, at + key.size())) {
    if (bytes.substr(at + key.size(), 16).find("v2:") != std::string_view::npos) ++claims;
  }
  return claims;
}

// The claim (or a waiting duplicate's poll) of `key`.
FaultProxy::Matcher claim_of(std::string key) {
  return [key = std::move(key)](std::string_view request) { return claims_in(request, key) > 0; };
}
// complete, release or mark_unknown of `key` (whichever the scenario sends first).
FaultProxy::Matcher owner_write_of(std::string key) {
  return [key = std::move(key)](std::string_view request) { return has(request, key) && claims_in(request, key) == 0; };
}
FaultProxy::Matcher completion_of(std::string key) {
  return [key = std::move(key)](std::string_view request) {
    return has(request, key) && claims_in(request, key) == 0 && has(request, "completed");
  };
}

// The suite's Postgres, through `proxy`. sslmode=disable: the bytes stay readable for matchers.
std::string dsn_through(const FaultProxy& proxy) {
  const std::string dsn = std::regex_replace(pg_dsn(), std::regex(R"(port=\d+)"), "port=" + std::to_string(proxy.port()));
  return dsn + " sslmode=disable";
}

std::uint16_t suite_postgres_port() {
  std::smatch match;
  const std::string dsn = pg_dsn();
  if (!std::regex_search(dsn, match, std::regex(R"(port=(\d+))"))) throw std::runtime_error("no port in " + dsn);
  return static_cast<std::uint16_t>(std::stoi(match[1]));
}

// Every answer a client got while retrying one key until it got a 200, and that 200.
struct Retries {
  std::set<int> statuses;    // every status seen, the final one included
  HttpResponse last;
  long long settled_ms = -1;  // from `since` to the 200; -1 if none came
};

Retries retry_until_executed(std::uint16_t port, const HttpRequest& request, Clock::time_point since,
                             std::chrono::milliseconds timeout) {
  Retries retries;
  while (Clock::now() - since < timeout) {
    retries.last = send(port, request);
    retries.statuses.insert(retries.last.status);
    if (retries.last.status == 200) {
      retries.settled_ms = elapsed_ms(since);
      return retries;
    }
    std::this_thread::sleep_for(50ms);
  }
  return retries;
}

// The background settle logs when it is done, shortly after the client's answer.
bool logged(ProxyRig& rig, std::string_view event) {
  const std::string quoted = "\"" + std::string(event) + "\"";
  return eventually([&] { return rig.proxy_logs().find(quoted) != std::string::npos; }, 5s, 50ms);
}

std::string seen(const std::set<int>& statuses) {
  std::string text;
  for (const int status : statuses) text += std::to_string(status) + " ";
  return text;
}

// How many claims of `key` reached Postgres through `proxy`.
std::size_t claims_forwarded(const FaultProxy& proxy, const std::string& key) {
  return claims_in(proxy.forwarded_to_server(), key);
}

// What a fault proxy does to one chosen statement or command.
enum class StatementFault {
  reply_lost_reset,           // executed, the answer swallowed, the connection reset
  reply_lost_hang,            // executed, the answer swallowed, the connection silent
  dropped_before_the_server,  // never forwarded, the connection reset: certainly not executed
  slow_past_the_deadline,     // executed, answered 1.5 s late on the same connection
};
constexpr auto kPastTheDeadline = 1500ms;  // over the rig's PG_QUERY_TIMEOUT (1 s)

void arm(FaultProxy& proxy, FaultProxy::Matcher matches, StatementFault fault,
         std::chrono::milliseconds slow_by = kPastTheDeadline) {
  switch (fault) {
    case StatementFault::reply_lost_reset: proxy.lose_next_reply(std::move(matches), AfterLoss::reset); return;
    case StatementFault::reply_lost_hang: proxy.lose_next_reply(std::move(matches), AfterLoss::hang); return;
    case StatementFault::dropped_before_the_server: proxy.drop_next_request(std::move(matches), AfterLoss::reset); return;
    case StatementFault::slow_past_the_deadline: proxy.delay_next_reply(std::move(matches), slow_by); return;
  }
}

bool answered_at_once(StatementFault fault) {
  return fault == StatementFault::reply_lost_reset || fault == StatementFault::dropped_before_the_server;
}

class LostReply : public FailureTest {
 protected:
  // The rig on the suite's Postgres through a fault proxy. The claim deadline is 1 s (the rig's
  // query and connect timeouts; its acquire timeout is 500 ms). The 10 s lease is above the
  // timing model's shortest (5 s with the rig's timeouts) unless a test raises the store's.
  ProxyRig& start_behind_fault_proxy(std::map<std::string, std::string> variables = {}) {
    postgres_proxy_ = std::make_unique<FaultProxy>("127.0.0.1", suite_postgres_port());
    variables.emplace("LEASE", "10s");
    return start_rig(rig_options(std::move(variables), dsn_through(*postgres_proxy_)));
  }
  FaultProxy& postgres_proxy() { return *postgres_proxy_; }
  // The port the proxy connects to for its store (the fault proxy's): the partition's line.
  std::uint16_t rig_port_to_store() const { return postgres_proxy_->port(); }

  // A claim whose reply was lost answers 503 (never forwarded, whatever the route's
  // store_unavailable), then frees its key: the retry executes once, within about a second, and
  // is never told 502 or the outcome is unknown.
  void expect_lost_claim_heals(const std::string& route, AfterLoss after, long long max_answer_ms) {
    ProxyRig& rig = start_behind_fault_proxy();
    const std::string key = unique_key("claim-lost-" + route);
    postgres_proxy().lose_next_reply(claim_of(key), after);

    const auto sent_at = Clock::now();
    const HttpResponse refused = send(rig.proxy_port(), keyed_post("/" + route, key));
    const long long answered_ms = elapsed_ms(sent_at);
    ASSERT_TRUE(postgres_proxy().wait_fired(1, 0ms)) << "the claim's reply was never lost: " << describe(refused);
    EXPECT_EQ(refused.status, 503) << describe(refused);
    EXPECT_EQ(problem_slug(refused), "store-unavailable") << describe(refused);
    EXPECT_FALSE(is_unchecked(refused));
    EXPECT_LT(answered_ms, max_answer_ms);
    EXPECT_EQ(rig.upstream_count(key), 0u) << "a claim with no answer was forwarded";

    const auto refused_at = Clock::now();
    const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/" + route, key), refused_at, 5s);
    EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
    EXPECT_FALSE(is_replay(retries.last));
    EXPECT_FALSE(is_unchecked(retries.last));
    EXPECT_LT(retries.settled_ms, 2000) << "the key stayed locked; seen: " << seen(retries.statuses);
    EXPECT_FALSE(retries.statuses.contains(502)) << "a request that never ran was called an unknown outcome";
    EXPECT_EQ(rig.upstream_count(key), 1u);

    const HttpResponse replayed = send(rig.proxy_port(), keyed_post("/" + route, key));
    EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
    EXPECT_EQ(replayed.body, retries.last.body);
    EXPECT_EQ(rig.upstream_count(key), 1u);
    EXPECT_TRUE(logged(rig, "release_recovered")) << "the claim was not released";
    std::cout << "[ lost     ] claim reply " << (after == AfterLoss::reset ? "reset" : "hung") << " on /" << route
              << ": 503 in " << answered_ms << " ms, executed " << retries.settled_ms << " ms later (seen "
              << seen(retries.statuses) << ")\n";
  }

  std::unique_ptr<FaultProxy> postgres_proxy_;
};

TEST_F(LostReply, ClaimReplyLostThenResetIs503AndTheKeyIsFreeAgain) { expect_lost_claim_heals("lock", AfterLoss::reset, 1000); }

TEST_F(LostReply, ClaimReplyLostThenHungIs503AtTheQueryTimeoutAndTheKeyIsFreeAgain) {
  expect_lost_claim_heals("lock", AfterLoss::hang, 2500);
}

TEST_F(LostReply, ClaimReplyLostOnAFailOpenRouteIsNeverForwardedUnprotected) {
  expect_lost_claim_heals("open", AfterLoss::reset, 1000);
}

TEST_F(LostReply, ClaimReplyLostOnARetryRouteFreesTheKeyBeforeItsLease) {
  expect_lost_claim_heals("retry", AfterLoss::hang, 2500);
}

// The claim never reached Postgres (the connection was reset under it): the proxy cannot tell
// that from a lost reply, so it answers the same way; the release finds nothing, and says so.
TEST_F(LostReply, ClaimResetBeforeTheServerSawItIs503AndTheRetryExecutes) {
  ProxyRig& rig = start_behind_fault_proxy();
  const std::string key = unique_key("claim-dropped");
  postgres_proxy().drop_next_request(claim_of(key), AfterLoss::reset);
  const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", key));
  ASSERT_TRUE(postgres_proxy().wait_fired(1, 0ms));
  EXPECT_EQ(refused.status, 503) << describe(refused);
  EXPECT_EQ(rig.upstream_count(key), 0u);
  const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/lock", key), Clock::now(), 5s);
  EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
  EXPECT_FALSE(retries.statuses.contains(502));
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

// Postgres answers slowly. Under the query timeout nothing changes; over it, every statement is a
// lost reply until the delay ends, and then the key is free again.
TEST_F(LostReply, SlowRepliesUnderTheDeadlineServeOverItRefuseThenHeal) {
  ProxyRig& rig = start_behind_fault_proxy();
  postgres_proxy().set_reply_delay(300ms);
  const std::string served_key = unique_key("slow-served");
  const HttpResponse served = send(rig.proxy_port(), keyed_post("/lock", served_key));
  EXPECT_EQ(served.status, 200) << describe(served);
  EXPECT_TRUE(is_replay(send(rig.proxy_port(), keyed_post("/lock", served_key))));
  EXPECT_EQ(rig.upstream_count(served_key), 1u);

  postgres_proxy().set_reply_delay(1500ms);  // over PG_QUERY_TIMEOUT (1 s)
  const std::string key = unique_key("slow-refused");
  const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(refused.status, 503) << describe(refused);
  EXPECT_EQ(rig.upstream_count(key), 0u);
  postgres_proxy().set_reply_delay(0ms);
  const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/lock", key), Clock::now(), 8s);
  EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
  EXPECT_FALSE(retries.statuses.contains(502));
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

// A silent partition: Postgres accepts bytes and never answers, on open connections and new ones.
// Claims fail within their deadline (nothing forwarded); once it lifts, every key runs once.
TEST_F(LostReply, BlackholedStoreRefusesWithinTheDeadlineThenEveryKeyRunsOnce) {
  ProxyRig& rig = start_behind_fault_proxy();
  std::vector<std::string> keys;
  postgres_proxy().set_blackhole(true);
  for (int i = 0; i < 3; ++i) {
    keys.push_back(unique_key("blackholed"));
    const auto sent_at = Clock::now();
    const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", keys.back()), 10s);
    EXPECT_EQ(refused.status, 503) << describe(refused);
    EXPECT_LT(elapsed_ms(sent_at), 3000) << "a claim into a blackhole outlived its deadline";
    EXPECT_EQ(rig.upstream_count(keys.back()), 0u);
  }
  postgres_proxy().set_blackhole(false);
  const auto lifted_at = Clock::now();
  for (const std::string& key : keys) {
    const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/lock", key), lifted_at, 15s);
    EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
    EXPECT_FALSE(retries.statuses.contains(502));
    EXPECT_EQ(rig.upstream_count(key), 1u);
  }
}

// A partition at the IP level: every packet between the proxy and its store is dropped (nftables,
// no RST, no FIN, no ICMP), on the pooled connections and on new ones, while one request is at
// its upstream. Claims are refused within their deadline and forward nothing; the request that
// was under way answers its client and stores its completion once the partition heals; then
// every refused key runs exactly once.
TEST_F(LostReply, PacketsDroppedSilentlyRefuseWithinTheDeadlineThenEveryKeyRunsOnce) {
  ProxyRig& rig = start_behind_fault_proxy();
  const std::string warm = unique_key("partition-warm");
  ASSERT_EQ(send(rig.proxy_port(), keyed_post("/lock", warm)).status, 200);  // pooled connections open

  const std::string under_way = unique_key("partition-under-way");
  auto answered = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/lock", under_way).with("X-Test-Delay-Ms", "500"), 10s);
  });
  ASSERT_TRUE(eventually([&] { return rig.upstream_count(under_way) == 1; }, 3s, 10ms));
  SilentPartition partition(rig_port_to_store());

  std::vector<std::string> keys;
  for (int i = 0; i < 3; ++i) {
    keys.push_back(unique_key("partitioned"));
    const auto sent_at = Clock::now();
    const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", keys.back()), 10s);
    EXPECT_EQ(refused.status, 503) << describe(refused);
    EXPECT_EQ(problem_slug(refused), "store-unavailable") << describe(refused);
    EXPECT_LT(elapsed_ms(sent_at), 3000) << "a claim into a partition outlived its deadline";
    EXPECT_EQ(rig.upstream_count(keys.back()), 0u);
  }
  const HttpResponse first = answered.get();
  EXPECT_EQ(first.status, 200) << describe(first);

  partition.lift();
  const auto lifted_at = Clock::now();
  for (const std::string& key : keys) {
    const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/lock", key), lifted_at, 15s);
    EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
    EXPECT_FALSE(retries.statuses.contains(502)) << "a request that never ran was called an unknown outcome";
    EXPECT_EQ(rig.upstream_count(key), 1u);
  }
  const HttpResponse replayed = send_until_settled(rig.proxy_port(), keyed_post("/lock", under_way), 10s);
  EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(replayed.body, first.body);
  EXPECT_EQ(rig.upstream_count(under_way), 1u) << "the request under way when the partition began ran again";
  EXPECT_EQ(rig.inspect("lock", under_way).state, "completed");

  // The claims refused during the partition must never reach Postgres afterwards: one that did
  // (retransmitted by the kernel once the network healed) would commit after its fenced release
  // and lock a key that never ran. TCP retransmits within a few seconds of the heal here.
  std::this_thread::sleep_until(lifted_at + 6s);
  for (const std::string& key : keys) {
    EXPECT_EQ(claims_forwarded(postgres_proxy(), key), 1u) << "only the retry's claim may arrive";
    EXPECT_EQ(rig.inspect("lock", key).state, "completed");
    EXPECT_EQ(rig.upstream_count(key), 1u);
  }
}

// The completion committed and its reply was lost. The client has its response; the background
// retry finds its own completion (idempotent for its owner) and says so: no false alarm.
void expect_lost_completion_is_recovered(LostReply& test, ProxyRig& rig, FaultProxy& postgres, StatementFault fault) {
  const std::string key = unique_key("completion-lost");
  arm(postgres, completion_of(key), fault);
  const HttpResponse answered = send(rig.proxy_port(), keyed_post("/lock", key));
  ASSERT_TRUE(postgres.wait_fired(1, 0ms)) << describe(answered);
  EXPECT_EQ(answered.status, 200) << describe(answered);
  EXPECT_FALSE(is_replay(answered));
  EXPECT_EQ(rig.upstream_count(key), 1u);

  const HttpResponse retried = send_until_settled(rig.proxy_port(), keyed_post("/lock", key), 5s);
  EXPECT_TRUE(is_replay(retried)) << describe(retried);
  EXPECT_EQ(retried.body, answered.body);
  EXPECT_EQ(rig.upstream_count(key), 1u);
  EXPECT_EQ(rig.inspect("lock", key).state, "completed");
  EXPECT_TRUE(logged(rig, "complete_recovered"));
  const std::string logs = rig.proxy_logs();
  EXPECT_EQ(logs.find("\"complete_abandoned\""), std::string::npos) << "a stored completion was reported lost";
  EXPECT_EQ(logs.find("\"next\":\"give_up\""), std::string::npos);
  static_cast<void>(test);
}

TEST_F(LostReply, CompletionReplyLostThenResetIsRecoveredWithoutAFalseAlarm) {
  ProxyRig& rig = start_behind_fault_proxy();
  expect_lost_completion_is_recovered(*this, rig, postgres_proxy(), StatementFault::reply_lost_reset);
}

TEST_F(LostReply, CompletionReplyLostThenHungIsRecoveredWithoutAFalseAlarm) {
  ProxyRig& rig = start_behind_fault_proxy();
  expect_lost_completion_is_recovered(*this, rig, postgres_proxy(), StatementFault::reply_lost_hang);
}

// The completion committed and its answer comes after query_timeout: the driver gave up on it,
// so it is a lost reply, recovered the same way; the late answer harms nothing.
TEST_F(LostReply, CompletionReplySlowerThanTheDeadlineIsRecoveredWithoutAFalseAlarm) {
  ProxyRig& rig = start_behind_fault_proxy();
  expect_lost_completion_is_recovered(*this, rig, postgres_proxy(), StatementFault::slow_past_the_deadline);
}

// The completion never reached Postgres (reset under it): the client has its response, the
// background retry writes it, and retries replay.
TEST_F(LostReply, CompletionDroppedBeforeTheServerIsWrittenByTheRetry) {
  ProxyRig& rig = start_behind_fault_proxy();
  const std::string key = unique_key("completion-dropped");
  postgres_proxy().drop_next_request(completion_of(key), AfterLoss::reset);
  const HttpResponse answered = send(rig.proxy_port(), keyed_post("/lock", key));
  ASSERT_TRUE(postgres_proxy().wait_fired(1, 0ms)) << describe(answered);
  EXPECT_EQ(answered.status, 200) << describe(answered);
  const HttpResponse retried = send_until_settled(rig.proxy_port(), keyed_post("/lock", key), 5s);
  EXPECT_TRUE(is_replay(retried)) << describe(retried);
  EXPECT_EQ(retried.body, answered.body);
  EXPECT_EQ(rig.upstream_count(key), 1u);
  EXPECT_TRUE(logged(rig, "complete_recovered"));
}

// release and mark_unknown whose answer is lost (reset, or hung until the store's deadline),
// comes after that deadline, or which never reach the server: the write is repeated in the background until the store answers,
// so the key still comes free (release: the upstream said "not processed", 503) or still turns
// unknown (mark_unknown: the upstream hung past its timeout), never left to a lapsed lease.
class LostOwnerWrite : public LostReply {
 protected:
  void arm_owner_write(const std::string& key, StatementFault fault) { arm(postgres_proxy(), owner_write_of(key), fault); }

  void expect_release_frees_the_key(StatementFault fault) {
    ProxyRig& rig = start_behind_fault_proxy();
    const std::string key = unique_key("release");
    arm_owner_write(key, fault);
    const HttpResponse declined = send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Status", "503"));
    ASSERT_TRUE(postgres_proxy().wait_fired(1, 3s)) << describe(declined);
    EXPECT_EQ(declined.status, 503) << describe(declined);
    EXPECT_EQ(problem_slug(declined), "") << "the upstream's own 503 is passed on";
    EXPECT_EQ(rig.upstream_count(key), 1u);

    const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/lock", key), Clock::now(), 5s);
    EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
    if (answered_at_once(fault)) {
      EXPECT_LT(retries.settled_ms, 2000) << "seen: " << seen(retries.statuses);
    }
    EXPECT_FALSE(retries.statuses.contains(502));
    EXPECT_EQ(rig.upstream_count(key), 2u) << "released means the upstream may be asked again, once";
    EXPECT_TRUE(logged(rig, "release_recovered"));
  }

  void expect_mark_unknown_locks_the_key(StatementFault fault) {
    ProxyRig& rig = start_behind_fault_proxy();
    const std::string key = unique_key("mark");
    arm_owner_write(key, fault);
    const HttpResponse timed_out = send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Hang", "1"));
    ASSERT_TRUE(postgres_proxy().wait_fired(1, 3s)) << describe(timed_out);
    EXPECT_EQ(timed_out.status, 504) << describe(timed_out);
    EXPECT_EQ(rig.upstream_count(key), 1u);

    EXPECT_TRUE(eventually([&] { return rig.inspect("lock", key).state == "unknown"; }, 5s, 100ms));
    const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
    EXPECT_EQ(retried.status, 502) << describe(retried);
    EXPECT_EQ(problem_slug(retried), "outcome-unknown");
    EXPECT_EQ(rig.upstream_count(key), 1u);
    EXPECT_TRUE(logged(rig, "mark_unknown_recovered"));
  }
};

TEST_F(LostOwnerWrite, ReleaseReplyLostStillFreesTheKey) { expect_release_frees_the_key(StatementFault::reply_lost_reset); }
TEST_F(LostOwnerWrite, ReleaseReplyHungStillFreesTheKey) { expect_release_frees_the_key(StatementFault::reply_lost_hang); }
TEST_F(LostOwnerWrite, ReleaseDroppedBeforeTheServerIsRepeatedAndFreesTheKey) {
  expect_release_frees_the_key(StatementFault::dropped_before_the_server);
}
TEST_F(LostOwnerWrite, MarkUnknownReplyLostStillLocksTheKey) { expect_mark_unknown_locks_the_key(StatementFault::reply_lost_reset); }
TEST_F(LostOwnerWrite, MarkUnknownReplyHungStillLocksTheKey) { expect_mark_unknown_locks_the_key(StatementFault::reply_lost_hang); }
TEST_F(LostOwnerWrite, MarkUnknownDroppedBeforeTheServerIsRepeatedAndLocksTheKey) {
  expect_mark_unknown_locks_the_key(StatementFault::dropped_before_the_server);
}
TEST_F(LostOwnerWrite, ReleaseReplySlowerThanTheDeadlineIsRepeatedAndFreesTheKey) {
  expect_release_frees_the_key(StatementFault::slow_past_the_deadline);
}
TEST_F(LostOwnerWrite, MarkUnknownReplySlowerThanTheDeadlineIsRepeatedAndLocksTheKey) {
  expect_mark_unknown_locks_the_key(StatementFault::slow_past_the_deadline);
}

// ---- Two background writes on one key -----------------------------------------------------------
// The first request's completion never reaches Postgres (dropped: certainly not written) and is
// retried in the background, held off until the test lets it through. Meanwhile its waiting
// duplicate's poll loses its reply (hung until query_timeout): the duplicate is answered 503 and
// releases what its poll may have claimed, in the background too. That release finds nothing of
// its own and ends first, while the completion is still pending. A retry must still not read the
// record the store holds (in flight, and once its lease lapsed an unknown outcome: 502 under
// `lock`, run again under `retry`): 503 until the completion lands, then the replay, executed once.
class OverlappingSettlements : public LostReply {
 protected:
  void expect_the_key_held_until_the_completion_lands(const std::string& route) {
    ProxyRig& rig = start_behind_fault_proxy({{"LEASE", "5s"}});  // the shortest the rig's timeouts allow
    const std::string key = unique_key("overlap-" + route);
    const std::string path = "/" + route;
    // Every attempt at the completion is dropped while `held` (at most 8 come in the ~6 s it is
    // held, with the background retry's backoff of 100 ms doubling to 2 s).
    auto held = std::make_shared<std::atomic<bool>>(true);
    for (int i = 0; i < 16; ++i) {
      postgres_proxy().drop_next_request([held, completion = completion_of(key)](
                                             std::string_view request) { return held->load() && completion(request); },
                                         AfterLoss::reset);
    }

    const auto sent_at = Clock::now();
    auto first = std::async(std::launch::async, [&] {
      return send(rig.proxy_port(), keyed_post(path, key).with("X-Test-Delay-Ms", "600"), 10s);
    });
    ASSERT_TRUE(eventually([&] { return rig.upstream_count(key) == 1; }, 3s, 5ms));
    auto duplicate = std::async(std::launch::async, [&] { return send(rig.proxy_port(), keyed_post(path, key), 10s); });
    // Its first claim found the first request in flight; its next poll's reply is lost.
    ASSERT_TRUE(eventually([&] { return claims_forwarded(postgres_proxy(), key) >= 2; }, 3s, 1ms));
    postgres_proxy().lose_next_reply(claim_of(key), AfterLoss::hang);

    const HttpResponse original = first.get();
    EXPECT_EQ(original.status, 200) << describe(original);
    const HttpResponse waited = duplicate.get();
    EXPECT_EQ(waited.status, 503) << describe(waited);
    EXPECT_EQ(problem_slug(waited), "store-unavailable") << describe(waited);
    ASSERT_TRUE(postgres_proxy().wait_fired(2, 0ms)) << "the completion was not dropped or the poll's reply not lost";
    ASSERT_TRUE(logged(rig, "release_recovered")) << "the duplicate's release never ended";
    EXPECT_EQ(rig.proxy_logs().find("\"complete_recovered\""), std::string::npos) << "the completion was not held";

    // Both while the lease holds and after it lapsed: the key is this process's to settle.
    for (const auto at : {Clock::now(), sent_at + 5500ms}) {
      std::this_thread::sleep_until(at);
      const HttpResponse retried = send(rig.proxy_port(), keyed_post(path, key), 10s);
      EXPECT_EQ(retried.status, 503) << "at " << elapsed_ms(sent_at) << " ms: " << describe(retried);
      EXPECT_EQ(problem_slug(retried), "store-unavailable") << describe(retried);
      EXPECT_EQ(rig.upstream_count(key), 1u) << "run again while its completion was pending";
    }

    held->store(false);
    const HttpResponse replayed = send_until_settled(rig.proxy_port(), keyed_post(path, key), 10s);
    EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
    EXPECT_EQ(replayed.body, original.body);
    EXPECT_EQ(rig.upstream_count(key), 1u);
    EXPECT_TRUE(logged(rig, "complete_recovered"));
    std::cout << "[ overlap  ] /" << route << ": " << postgres_proxy().faults_fired() - 1
              << " completion attempts dropped, the replay " << elapsed_ms(sent_at) << " ms after the first request\n";
  }
};

TEST_F(OverlappingSettlements, AReleaseEndingFirstLeavesTheKeyHeldUntilTheCompletionLandsUnderLock) {
  expect_the_key_held_until_the_completion_lands("wait");
}

TEST_F(OverlappingSettlements, AReleaseEndingFirstLeavesTheKeyHeldUntilTheCompletionLandsUnderRetry) {
  expect_the_key_held_until_the_completion_lands("wait-retry");
}

// ---- A saturated store -------------------------------------------------------------------------
// The store is up but its one connection is taken (a claim whose reply Postgres delays): the next
// claim finds no connection within acquire_timeout. That is a busy store, not an absent one, so
// even a fail_open route answers 503 and forwards nothing: a retry storm's duplicates must not run
// unprotected exactly when the store is busiest.
TEST_F(LostReply, SaturatedPoolOnAFailOpenRouteIs503AndForwardsNothing) {
  ProxyRig& rig = start_behind_fault_proxy(
      // Lease: the timing model's shortest with these store timeouts, 2 × 5s + 300ms + 500ms + 1s + 1s.
      {{"WORKERS", "1"}, {"POOL_SIZE", "1"}, {"PG_QUERY_TIMEOUT", "5s"}, {"PG_ACQUIRE_TIMEOUT", "300ms"}, {"LEASE", "12800ms"}});
  // The pool's connection is up before the delay starts (the delay would also slow its handshake).
  const std::string warm = unique_key("saturated-warm");
  ASSERT_EQ(send(rig.proxy_port(), keyed_post("/open", warm)).status, 200);
  postgres_proxy().set_reply_delay(1500ms);

  const std::string first_key = unique_key("saturated-first");
  auto first = std::async(std::launch::async, [&] { return send(rig.proxy_port(), keyed_post("/open", first_key), 15s); });
  std::this_thread::sleep_for(200ms);  // its claim holds the connection now
  const std::string key = unique_key("saturated");
  const auto sent_at = Clock::now();
  const HttpResponse refused = send(rig.proxy_port(), keyed_post("/open", key));
  EXPECT_EQ(refused.status, 503) << describe(refused);
  EXPECT_EQ(problem_slug(refused), "store-unavailable") << describe(refused);
  EXPECT_FALSE(is_unchecked(refused)) << "a saturated store was taken for an absent one";
  EXPECT_LT(elapsed_ms(sent_at), 1200);
  EXPECT_EQ(rig.upstream_count(key), 0u);
  EXPECT_EQ(first.get().status, 200);

  postgres_proxy().set_reply_delay(0ms);
  const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/open", key), Clock::now(), 5s);
  EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
  EXPECT_FALSE(is_unchecked(retries.last));
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

// No connection can be made at all (the store refuses every connection): that is what fail_open is
// for. The request is forwarded, unprotected and marked so.
TEST_F(LostReply, UnreachableStoreOnAFailOpenRouteForwardsUnchecked) {
  ProxyRig& rig = start_behind_fault_proxy();
  postgres_proxy().set_refusing(true);
  postgres_proxy().reset_all();
  // The pool notices its idle connections die at once (it watches them); from then on every
  // connect is refused.
  ASSERT_TRUE(eventually([&] { return postgres_proxy().open_connections() == 0; }, 2s));
  std::this_thread::sleep_for(200ms);
  const std::string key = unique_key("unreachable-open");
  const HttpResponse forwarded = send(rig.proxy_port(), keyed_post("/open", key), 10s);
  EXPECT_EQ(forwarded.status, 200) << describe(forwarded);
  EXPECT_TRUE(is_unchecked(forwarded)) << describe(forwarded);
  EXPECT_EQ(rig.upstream_count(key), 1u);
  const std::string closed_key = unique_key("unreachable-lock");
  const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", closed_key), 10s);
  EXPECT_EQ(refused.status, 503) << describe(refused);
  EXPECT_EQ(rig.upstream_count(closed_key), 0u);
}

// ---- The upstream --------------------------------------------------------------------------------
// The upstream executed (its own counter says so) and its answer never reached the proxy. The proxy
// cannot fence the upstream as it fences its store, so at most once means: the key turns unknown
// (502 to every retry, nothing runs again) under `lock`, and is taken over after the lease under
// `retry`. A request the upstream never saw is released.

class LostUpstreamReply : public LostReply {
 protected:
  ProxyRig& start_with_upstream_behind_fault_proxy() {
    RigOptions options = rig_options({{"LEASE", "5s"}});
    options.route_upstream = [this](std::uint16_t upstream_port) {
      upstream_proxy_ = std::make_unique<FaultProxy>("127.0.0.1", upstream_port);
      return upstream_proxy_->port();
    };
    return start_rig(std::move(options));
  }
  FaultProxy& upstream_proxy() { return *upstream_proxy_; }
  std::unique_ptr<FaultProxy> upstream_proxy_;
};

FaultProxy::Matcher request_with(std::string key) {
  return [key = std::move(key)](std::string_view request) { return has(request, "POST /") && has(request, key); };
}

TEST_F(LostUpstreamReply, ResponseLostThenResetIs502AndTheKeyIsUnknownNeverRunAgain) {
  ProxyRig& rig = start_with_upstream_behind_fault_proxy();
  const std::string key = unique_key("upstream-reply-lost");
  upstream_proxy().lose_next_reply(request_with(key), AfterLoss::reset);
  const HttpResponse lost = send(rig.proxy_port(), keyed_post("/lock", key));
  ASSERT_TRUE(upstream_proxy().wait_fired(1, 0ms)) << describe(lost);
  EXPECT_EQ(lost.status, 502) << describe(lost);
  EXPECT_EQ(rig.upstream_count(key), 1u);
  for (int i = 0; i < 2; ++i) {
    const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
    EXPECT_EQ(retried.status, 502) << describe(retried);
    EXPECT_EQ(problem_slug(retried), "outcome-unknown") << describe(retried);
  }
  EXPECT_EQ(rig.inspect("lock", key).state, "unknown");
  EXPECT_EQ(rig.upstream_count(key), 1u) << "an unknown outcome was executed again";
}

TEST_F(LostUpstreamReply, ResponseNeverComesIs504AndTheKeyIsUnknown) {
  ProxyRig& rig = start_with_upstream_behind_fault_proxy();
  const std::string key = unique_key("upstream-blackholed");
  upstream_proxy().lose_next_reply(request_with(key), AfterLoss::hang);
  const auto sent_at = Clock::now();
  const HttpResponse lost = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(lost.status, 504) << describe(lost);
  EXPECT_GE(elapsed_ms(sent_at), 900) << "answered before upstream.timeout";
  EXPECT_EQ(rig.upstream_count(key), 1u);
  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(problem_slug(retried), "outcome-unknown") << describe(retried);
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

// Slow under upstream.timeout: an ordinary exchange, stored and replayed.
TEST_F(LostUpstreamReply, ResponseSlowUnderTheTimeoutIsServedAndStored) {
  ProxyRig& rig = start_with_upstream_behind_fault_proxy();
  const std::string key = unique_key("upstream-slow");
  upstream_proxy().delay_next_reply(request_with(key), 500ms);
  const auto sent_at = Clock::now();
  const HttpResponse served = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_GE(elapsed_ms(sent_at), 450);
  ASSERT_TRUE(upstream_proxy().wait_fired(1, 0ms)) << describe(served);
  EXPECT_EQ(served.status, 200) << describe(served);
  const HttpResponse replayed = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(replayed.body, served.body);
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

// Slower than upstream.timeout: 504 and unknown, as a hang. The late response then arrives on the
// connection the proxy gave up on; it must never become the answer to a later request.
TEST_F(LostUpstreamReply, ResponseSlowerThanTheTimeoutIs504AndItsLateBytesAnswerNothingElse) {
  ProxyRig& rig = start_with_upstream_behind_fault_proxy();
  const std::string key = unique_key("upstream-too-slow");
  upstream_proxy().delay_next_reply(request_with(key), 1500ms);
  const HttpResponse late = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(late.status, 504) << describe(late);
  std::this_thread::sleep_for(1s);  // the held response reaches the proxy's side of the socket
  for (int i = 0; i < 3; ++i) {
    const std::string other = unique_key("after-the-late-reply");
    const HttpResponse answered = send(rig.proxy_port(), keyed_post("/lock", other, other).with("X-Test-Echo", "1"));
    EXPECT_EQ(answered.status, 200) << describe(answered);
    EXPECT_EQ(answered.body, other) << "another request's answer";
    EXPECT_EQ(rig.upstream_count(other), 1u);
  }
  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(problem_slug(retried), "outcome-unknown") << describe(retried);
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

TEST_F(LostUpstreamReply, ResponseLostOnARetryRouteIsTakenOverAfterTheLeaseAndRunsOnceMore) {
  ProxyRig& rig = start_with_upstream_behind_fault_proxy();
  const std::string key = unique_key("upstream-lost-retry");
  upstream_proxy().lose_next_reply(request_with(key), AfterLoss::reset);
  const auto sent_at = Clock::now();
  const HttpResponse lost = send(rig.proxy_port(), keyed_post("/retry", key));
  EXPECT_EQ(lost.status, 502) << describe(lost);
  const HttpResponse early = send(rig.proxy_port(), keyed_post("/retry", key));
  EXPECT_EQ(early.status, 409) << "taken over within the lease: " << describe(early);
  const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/retry", key), sent_at, 10s);
  EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
  EXPECT_GE(retries.settled_ms, 4900) << "taken over before the 5 s lease lapsed";
  EXPECT_EQ(rig.upstream_count(key), 2u) << "retry mode runs it exactly once more";
}

// ---- The Redis replay cache -------------------------------------------------------------------
// Redis is a cache: a lost GET falls back to Postgres within the Redis deadline, a lost SET
// leaves a copy or none, and either way the client gets the stored response, byte for byte.

// The decision the access log gave the last request: replay (from Postgres) or replay_redis.
std::string last_decision(ProxyRig& rig) {
  const std::string logs = rig.proxy_logs();
  const std::size_t at = logs.rfind("\"decision\":\"");
  if (at == std::string::npos) return {};
  const std::size_t start = at + 12;
  return logs.substr(start, logs.find('"', start) - start);
}

class LostRedisReply : public LostReply {
 protected:
  ProxyRig& start_with_redis_behind_fault_proxy() {
    redis_proxy_ = std::make_unique<FaultProxy>("127.0.0.1", suite_redis_port());
    const std::string redis = "  redis: { address: \"127.0.0.1:" + std::to_string(redis_proxy_->port()) +
                              "\", connect_timeout: 300ms, timeout: 100ms, key_prefix: \"" + unique_key("lost-reply:") + ":\" }";
    // One worker: one Redis connection, so every request meets the connection the fault hit.
    return start_behind_fault_proxy({{"STORE_REDIS", redis}, {"WORKERS", "1"}});
  }
  FaultProxy& redis_proxy() { return *redis_proxy_; }

  std::unique_ptr<FaultProxy> redis_proxy_;
};

constexpr std::string_view kRespGet = "$3\r\nGET\r\n";
constexpr std::string_view kRespSet = "$3\r\nSET\r\n";

// The rig's Redis deadlines: a lookup (GET + PTTL) answers at store.redis.timeout (100 ms) and
// keeps the connection until max(timeout, connect_timeout) = 300 ms, so a GET answered at 200 ms
// arrives late on the live connection (matched to its entry and dropped); a SET has one deadline,
// 300 ms, so one answered at 500 ms comes after its connection was given up.
constexpr auto kLateGet = 200ms;
constexpr auto kLateSet = 500ms;

// A request whose response is its key (the upstream echoes the body): two keys' answers differ.
HttpRequest echoed(const std::string& key) { return keyed_post("/lock", key, key).with("X-Test-Echo", "1"); }

// A key executed once whose copy is in Redis (a retry was served from it).
std::string executed_and_cached(ProxyRig& rig, const std::string& name) {
  const std::string key = unique_key(name);
  const HttpResponse first = send(rig.proxy_port(), echoed(key));
  EXPECT_EQ(first.status, 200) << describe(first);
  // The copy is written after the client's answer: wait until a retry is served from Redis.
  EXPECT_TRUE(eventually([&] { return is_replay(send(rig.proxy_port(), echoed(key))) && last_decision(rig) == "replay_redis"; },
                         5s, 50ms))
      << "the record never reached Redis";
  return key;
}

// Replays of `key` and of `other` alternate, each answered with its own response, until both
// came from Redis again: a late or lost Redis answer never becomes the answer to a later command.
void expect_replays_right_and_from_redis_again(ProxyRig& rig, const std::string& key, const std::string& other) {
  std::this_thread::sleep_for(kLateSet);  // every held answer has reached the proxy's socket
  std::set<std::string> from_redis;
  for (int i = 0; i < 20 && from_redis.size() < 2; ++i) {
    for (const std::string& each : {key, other}) {
      const HttpResponse again = send(rig.proxy_port(), echoed(each));
      EXPECT_TRUE(is_replay(again)) << describe(again);
      EXPECT_EQ(again.body, each) << "another key's response";
      if (last_decision(rig) == "replay_redis") from_redis.insert(each);
    }
    if (from_redis.size() < 2) std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(from_redis.size(), 2u) << "the replay cache never served both keys again";
  EXPECT_EQ(rig.upstream_count(key), 1u);
  EXPECT_EQ(rig.upstream_count(other), 1u);
}

// The first execution's copy reached Redis; the retry's GET loses its reply, never reaches Redis,
// or is answered after the Redis deadline.
void expect_failed_get_falls_back(LostRedisReply& test, ProxyRig& rig, FaultProxy& redis, StatementFault fault) {
  const std::string other = executed_and_cached(rig, "redis-get-other");
  const std::string key = executed_and_cached(rig, "redis-get-lost");
  arm(redis, contains_all({std::string(kRespGet)}), fault, kLateGet);
  const auto sent_at = Clock::now();
  const HttpResponse retried = send(rig.proxy_port(), echoed(key));
  const long long took_ms = elapsed_ms(sent_at);
  ASSERT_TRUE(redis.wait_fired(1, 0ms)) << describe(retried);
  EXPECT_TRUE(is_replay(retried)) << describe(retried);
  EXPECT_EQ(retried.body, key);
  EXPECT_EQ(last_decision(rig), "replay") << "not answered from Postgres";
  EXPECT_LT(took_ms, answered_at_once(fault) ? 300 : 1000) << "the fallback waited past the Redis deadline";
  expect_replays_right_and_from_redis_again(rig, key, other);
  static_cast<void>(test);
}

TEST_F(LostRedisReply, GetReplyLostThenResetFallsBackToPostgres) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_failed_get_falls_back(*this, rig, redis_proxy(), StatementFault::reply_lost_reset);
}

TEST_F(LostRedisReply, GetReplyLostThenHungFallsBackAtTheRedisDeadline) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_failed_get_falls_back(*this, rig, redis_proxy(), StatementFault::reply_lost_hang);
}

TEST_F(LostRedisReply, GetDroppedBeforeTheServerFallsBackToPostgres) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_failed_get_falls_back(*this, rig, redis_proxy(), StatementFault::dropped_before_the_server);
}

TEST_F(LostRedisReply, GetReplySlowerThanTheRedisDeadlineFallsBackAndTheLateReplyAnswersNothingElse) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_failed_get_falls_back(*this, rig, redis_proxy(), StatementFault::slow_past_the_deadline);
}

// The copy's SET loses its answer, never reaches Redis or is answered late: the client has its
// response either way, and every replay is that response, from Redis or from Postgres.
void expect_failed_set_leaves_every_replay_right(LostRedisReply& test, ProxyRig& rig, FaultProxy& redis,
                                                 StatementFault fault) {
  const std::string other = executed_and_cached(rig, "redis-set-other");
  const std::string key = unique_key("redis-set-lost");
  arm(redis, contains_all({std::string(kRespSet)}), fault, kLateSet);
  const HttpResponse first = send(rig.proxy_port(), echoed(key));
  EXPECT_EQ(first.status, 200) << describe(first);
  EXPECT_FALSE(is_replay(first));
  ASSERT_TRUE(redis.wait_fired(1, 3s));
  const HttpResponse again = send(rig.proxy_port(), echoed(key));
  EXPECT_TRUE(is_replay(again)) << describe(again);
  EXPECT_EQ(again.body, key);
  if (fault == StatementFault::dropped_before_the_server) {
    EXPECT_EQ(last_decision(rig), "replay") << "no copy was written, so Postgres answered";
  }
  expect_replays_right_and_from_redis_again(rig, key, other);
  static_cast<void>(test);
}

TEST_F(LostRedisReply, SetReplyLostLeavesTheClientsAnswerAndEveryReplayRight) {
  for (const StatementFault fault : {StatementFault::reply_lost_reset, StatementFault::reply_lost_hang}) {
    ProxyRig& rig = start_with_redis_behind_fault_proxy();
    expect_failed_set_leaves_every_replay_right(*this, rig, redis_proxy(), fault);
    rig_.reset();
  }
}

TEST_F(LostRedisReply, SetDroppedBeforeTheServerLeavesNoCopyAndEveryReplayRight) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_failed_set_leaves_every_replay_right(*this, rig, redis_proxy(), StatementFault::dropped_before_the_server);
}

TEST_F(LostRedisReply, SetReplySlowerThanTheRedisDeadlineLeavesEveryReplayRight) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_failed_set_leaves_every_replay_right(*this, rig, redis_proxy(), StatementFault::slow_past_the_deadline);
}

TEST_F(LostRedisReply, BlackholedRedisFallsBackWithinItsDeadline) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  const std::string key = unique_key("redis-blackholed");
  const HttpResponse first = send(rig.proxy_port(), keyed_post("/lock", key));
  ASSERT_EQ(first.status, 200) << describe(first);
  redis_proxy().set_blackhole(true);
  redis_proxy().reset_all();  // open connections die; new ones go nowhere
  for (int i = 0; i < 3; ++i) {
    const auto sent_at = Clock::now();
    const HttpResponse again = send(rig.proxy_port(), keyed_post("/lock", key));
    EXPECT_TRUE(is_replay(again)) << describe(again);
    EXPECT_EQ(again.body, first.body);
    EXPECT_LT(elapsed_ms(sent_at), 1000);
  }
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

}  // namespace
}  // namespace idem::test::failure
