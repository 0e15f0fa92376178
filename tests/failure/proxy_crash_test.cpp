// The proxy killed with kill -9 while the upstream is processing: the claim survives in Postgres,
// the restarted proxy answers retries 409 while the lease runs, and after it the route's
// unknown_outcome decides: lock never re-executes, retry executes once more.
#include <future>
#include <thread>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/eventually.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;

// The shortest lease the timing model allows with the rig's store timeouts and a 2 s upstream
// timeout (proxy_rig.hpp): 2 s + 4 s.
constexpr auto kLease = 6s;
constexpr auto kUpstreamWork = 1500ms;

class ProxyCrash : public FailureTest {};

// Polls until the upstream has received a request with each key: the proxy is then surely
// between forwarding and answering.
bool wait_until_upstream_received(const ProxyRig& rig, std::initializer_list<std::string_view> keys,
                                  std::chrono::milliseconds timeout) {
  return eventually(
      [&] {
        bool all = true;
        for (const auto key : keys) all = all && rig.upstream_count(key) == 1;
        return all;
      },
      timeout, 10ms);
}

TEST_F(ProxyCrash, KilledMidRequestThen409WithinLeaseThenLockRefusesAndRetryReExecutes) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "2s"}, {"LEASE", "6s"}}));
  const std::string lock_key = unique_key("crash-lock");
  const std::string retry_key = unique_key("crash-retry");
  const std::string delay = std::to_string(kUpstreamWork.count());

  const auto sent_at = std::chrono::steady_clock::now();
  auto lock_first = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/lock", lock_key).with("X-Test-Delay-Ms", delay));
  });
  auto retry_first = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/retry", retry_key).with("X-Test-Delay-Ms", delay));
  });
  ASSERT_TRUE(wait_until_upstream_received(rig, {lock_key, retry_key}, 1000ms)) << "the upstream never got both requests";

  rig.kill_proxy();
  EXPECT_FALSE(lock_first.get().ok()) << "the client of a killed proxy cannot have an answer";
  EXPECT_FALSE(retry_first.get().ok());
  rig.start_proxy();

  // Within the lease: both records are still in flight, whatever their route's policy.
  for (const auto& [path, key] : {std::pair{"/lock", lock_key}, std::pair{"/retry", retry_key}}) {
    const HttpResponse early = send(rig.proxy_port(), keyed_post(path, key));
    ASSERT_LT(std::chrono::steady_clock::now() - sent_at, kLease) << "the restart took the whole lease";
    EXPECT_EQ(early.status, 409) << describe(early);
    EXPECT_EQ(problem_slug(early), "request-in-flight") << describe(early);
    const auto retry_after = retry_after_seconds(early);
    ASSERT_TRUE(retry_after.has_value()) << describe(early);
    EXPECT_GE(*retry_after, 1);
    EXPECT_LE(*retry_after, std::chrono::seconds(kLease).count());
  }
  EXPECT_EQ(rig.inspect("lock", lock_key).state, "in_flight");

  std::this_thread::sleep_until(sent_at + kLease + 300ms);

  // lock: at most once. The outcome is unknown and stays so; nothing runs again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", lock_key));
    EXPECT_EQ(refused.status, 502) << describe(refused);
    EXPECT_EQ(problem_slug(refused), "outcome-unknown") << describe(refused);
  }
  EXPECT_EQ(rig.upstream_count(lock_key), 1u);

  // retry: the first retry after the lease takes the record over and executes again, once.
  const HttpResponse reexecuted = send(rig.proxy_port(), keyed_post("/retry", retry_key));
  EXPECT_EQ(reexecuted.status, 200) << describe(reexecuted);
  EXPECT_FALSE(is_replay(reexecuted));
  EXPECT_EQ(rig.upstream_count(retry_key), 2u);
  const HttpResponse replayed = send(rig.proxy_port(), keyed_post("/retry", retry_key));
  EXPECT_EQ(replayed.status, 200) << describe(replayed);
  EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(replayed.body, reexecuted.body);
  EXPECT_EQ(rig.upstream_count(retry_key), 2u);
}

// The proxy dies mid-request on a lock route and nothing ever settles the record: its request may
// have run, so it is an unknown outcome and lasts as long as one (ttl + unknown_retention), not
// just its ttl. With the reaper sweeping every 200 ms, a retry past the ttl still gets 502 and
// nothing runs again (README "Timing").
TEST_F(ProxyCrash, AnUnsettledLockRecordStillAnswers502PastItsTtl) {
  constexpr auto kTtl = 7s;
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "2s"}, {"LEASE", "6s"}, {"TTL", "7s"}, {"REAPER_INTERVAL", "200ms"}}));
  const std::string key = unique_key("crash-unsettled");
  const auto sent_at = std::chrono::steady_clock::now();
  auto first = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Delay-Ms", std::to_string(kUpstreamWork.count())));
  });
  ASSERT_TRUE(wait_until_upstream_received(rig, {key}, 1000ms)) << "the upstream never got the request";
  rig.kill_proxy();
  EXPECT_FALSE(first.get().ok());
  rig.start_proxy();

  std::this_thread::sleep_until(sent_at + kTtl + 1s);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", key));
    EXPECT_EQ(refused.status, 502) << describe(refused);
    EXPECT_EQ(problem_slug(refused), "outcome-unknown") << describe(refused);
  }
  EXPECT_EQ(rig.upstream_count(key), 1u) << "a request whose outcome is unknown ran again at its ttl";
  const RecordInspection record = rig.inspect("lock", key);
  EXPECT_EQ(record.state, "unknown") << "an in-flight record whose lease lapsed reads as unknown";
  EXPECT_GE(record.expires_at_ms - record.created_at_ms, std::chrono::milliseconds(kTtl + std::chrono::hours(24)).count())
      << "expected ttl + unknown_retention (7 days by default)";
}

}  // namespace
}  // namespace idem::test::failure
