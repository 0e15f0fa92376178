// Lost replies: a FaultProxy between idemproxy and Postgres (or Redis) swallows the answer to one
// chosen statement or command, after the server executed it, then resets or hangs the connection.
// The promise under test: whatever the store did, a logical request executes at most once, the
// client's answer says what happened, and the key heals by itself (no operator): a claim that was
// never forwarded frees its key, a completion that committed is not reported lost.
//
// Statements are told apart by their parameters, which travel as raw bytes in the Bind message
// (prepared and unnamed alike): only the claim carries the fingerprint ("v1:..."); the owner
// writes (complete, release, mark_unknown) carry scope, key and owner, and complete also its
// state ("completed"). Every key is unique to its test.
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

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using AfterLoss = FaultProxy::AfterLoss;

bool has(std::string_view request, std::string_view needle) { return request.find(needle) != std::string_view::npos; }

// The claim (or a waiting duplicate's poll) of `key`.
FaultProxy::Matcher claim_of(std::string key) {
  return [key = std::move(key)](std::string_view request) { return has(request, key) && has(request, "v1:"); };
}
// complete, release or mark_unknown of `key` (whichever the scenario sends first).
FaultProxy::Matcher owner_write_of(std::string key) {
  return [key = std::move(key)](std::string_view request) { return has(request, key) && !has(request, "v1:"); };
}
FaultProxy::Matcher completion_of(std::string key) {
  return [key = std::move(key)](std::string_view request) {
    return has(request, key) && !has(request, "v1:") && has(request, "completed");
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

// The completion committed and its reply was lost. The client has its response; the background
// retry finds its own completion (idempotent for its owner) and says so: no false alarm.
void expect_lost_completion_is_recovered(LostReply& test, ProxyRig& rig, FaultProxy& postgres, AfterLoss after) {
  const std::string key = unique_key("completion-lost");
  postgres.lose_next_reply(completion_of(key), after);
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
  expect_lost_completion_is_recovered(*this, rig, postgres_proxy(), AfterLoss::reset);
}

TEST_F(LostReply, CompletionReplyLostThenHungIsRecoveredWithoutAFalseAlarm) {
  ProxyRig& rig = start_behind_fault_proxy();
  expect_lost_completion_is_recovered(*this, rig, postgres_proxy(), AfterLoss::hang);
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

// release and mark_unknown whose answer is lost (reset, or hung until the store's deadline), or
// which never reach the server: the write is repeated in the background until the store answers,
// so the key still comes free (release: the upstream said "not processed", 503) or still turns
// unknown (mark_unknown: the upstream hung past its timeout), never left to a lapsed lease.
enum class OwnerWriteFault { reply_lost_reset, reply_lost_hang, dropped_before_the_server };

class LostOwnerWrite : public LostReply {
 protected:
  void arm(const std::string& key, OwnerWriteFault fault) {
    switch (fault) {
      case OwnerWriteFault::reply_lost_reset: postgres_proxy().lose_next_reply(owner_write_of(key), AfterLoss::reset); break;
      case OwnerWriteFault::reply_lost_hang: postgres_proxy().lose_next_reply(owner_write_of(key), AfterLoss::hang); break;
      case OwnerWriteFault::dropped_before_the_server:
        postgres_proxy().drop_next_request(owner_write_of(key), AfterLoss::reset);
        break;
    }
  }

  void expect_release_frees_the_key(OwnerWriteFault fault) {
    ProxyRig& rig = start_behind_fault_proxy();
    const std::string key = unique_key("release");
    arm(key, fault);
    const HttpResponse declined = send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Status", "503"));
    ASSERT_TRUE(postgres_proxy().wait_fired(1, 3s)) << describe(declined);
    EXPECT_EQ(declined.status, 503) << describe(declined);
    EXPECT_EQ(problem_slug(declined), "") << "the upstream's own 503 is passed on";
    EXPECT_EQ(rig.upstream_count(key), 1u);

    const Retries retries = retry_until_executed(rig.proxy_port(), keyed_post("/lock", key), Clock::now(), 5s);
    EXPECT_EQ(retries.last.status, 200) << "seen: " << seen(retries.statuses) << describe(retries.last);
    if (fault != OwnerWriteFault::reply_lost_hang) {
      EXPECT_LT(retries.settled_ms, 2000) << "seen: " << seen(retries.statuses);
    }
    EXPECT_FALSE(retries.statuses.contains(502));
    EXPECT_EQ(rig.upstream_count(key), 2u) << "released means the upstream may be asked again, once";
    EXPECT_TRUE(logged(rig, "release_recovered"));
  }

  void expect_mark_unknown_locks_the_key(OwnerWriteFault fault) {
    ProxyRig& rig = start_behind_fault_proxy();
    const std::string key = unique_key("mark");
    arm(key, fault);
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

TEST_F(LostOwnerWrite, ReleaseReplyLostStillFreesTheKey) { expect_release_frees_the_key(OwnerWriteFault::reply_lost_reset); }
TEST_F(LostOwnerWrite, ReleaseReplyHungStillFreesTheKey) { expect_release_frees_the_key(OwnerWriteFault::reply_lost_hang); }
TEST_F(LostOwnerWrite, ReleaseDroppedBeforeTheServerIsRepeatedAndFreesTheKey) {
  expect_release_frees_the_key(OwnerWriteFault::dropped_before_the_server);
}
TEST_F(LostOwnerWrite, MarkUnknownReplyLostStillLocksTheKey) { expect_mark_unknown_locks_the_key(OwnerWriteFault::reply_lost_reset); }
TEST_F(LostOwnerWrite, MarkUnknownReplyHungStillLocksTheKey) { expect_mark_unknown_locks_the_key(OwnerWriteFault::reply_lost_hang); }
TEST_F(LostOwnerWrite, MarkUnknownDroppedBeforeTheServerIsRepeatedAndLocksTheKey) {
  expect_mark_unknown_locks_the_key(OwnerWriteFault::dropped_before_the_server);
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
    return start_behind_fault_proxy({{"STORE_REDIS", redis}});
  }
  FaultProxy& redis_proxy() { return *redis_proxy_; }

  std::unique_ptr<FaultProxy> redis_proxy_;
};

constexpr std::string_view kRespGet = "$3\r\nGET\r\n";
constexpr std::string_view kRespSet = "$3\r\nSET\r\n";

// The first execution's copy reached Redis; the retry's GET loses its reply.
void expect_lost_get_falls_back(LostRedisReply& test, ProxyRig& rig, FaultProxy& redis, AfterLoss after) {
  const std::string key = unique_key("redis-get-lost");
  const HttpResponse first = send(rig.proxy_port(), keyed_post("/lock", key));
  ASSERT_EQ(first.status, 200) << describe(first);
  // The copy is written after the client's answer: wait until a retry is served from Redis.
  ASSERT_TRUE(eventually([&] {
    return is_replay(send(rig.proxy_port(), keyed_post("/lock", key))) && last_decision(rig) == "replay_redis";
  }, 5s, 50ms)) << "the record never reached Redis";

  redis.lose_next_reply(contains_all({std::string(kRespGet)}), after);
  const auto sent_at = Clock::now();
  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  const long long took_ms = elapsed_ms(sent_at);
  ASSERT_TRUE(redis.wait_fired(1, 0ms)) << describe(retried);
  EXPECT_TRUE(is_replay(retried)) << describe(retried);
  EXPECT_EQ(retried.body, first.body);
  EXPECT_EQ(last_decision(rig), "replay") << "not answered from Postgres";
  EXPECT_LT(took_ms, 1000) << "the fallback waited past the Redis deadline";
  EXPECT_EQ(rig.upstream_count(key), 1u);
  static_cast<void>(test);
}

TEST_F(LostRedisReply, GetReplyLostThenResetFallsBackToPostgres) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_lost_get_falls_back(*this, rig, redis_proxy(), AfterLoss::reset);
}

TEST_F(LostRedisReply, GetReplyLostThenHungFallsBackAtTheRedisDeadline) {
  ProxyRig& rig = start_with_redis_behind_fault_proxy();
  expect_lost_get_falls_back(*this, rig, redis_proxy(), AfterLoss::hang);
}

TEST_F(LostRedisReply, SetReplyLostLeavesTheClientsAnswerAndEveryReplayRight) {
  for (const AfterLoss after : {AfterLoss::reset, AfterLoss::hang}) {
    ProxyRig& rig = start_with_redis_behind_fault_proxy();
    const std::string key = unique_key("redis-set-lost");
    redis_proxy().lose_next_reply(contains_all({std::string(kRespSet)}), after);
    const HttpResponse first = send(rig.proxy_port(), keyed_post("/lock", key));
    EXPECT_EQ(first.status, 200) << describe(first);
    EXPECT_FALSE(is_replay(first));
    ASSERT_TRUE(redis_proxy().wait_fired(1, 3s));
    for (int i = 0; i < 3; ++i) {
      const HttpResponse again = send(rig.proxy_port(), keyed_post("/lock", key));
      EXPECT_TRUE(is_replay(again)) << describe(again);
      EXPECT_EQ(again.body, first.body);
    }
    EXPECT_EQ(rig.upstream_count(key), 1u);
    rig_.reset();
  }
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
