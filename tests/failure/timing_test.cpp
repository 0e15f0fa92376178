// At most once for every timing: an operator cannot release a record whose request may still be
// executing, and what the proxy refuses it says precisely.
#include <future>
#include <thread>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class Timing : public FailureTest {};

// `idemproxy --release` while the request runs upstream (lease running): refused, exit 4, the
// time left named; the request completes, is stored and replays; it ran once. After the lease
// of a request that never finished, the same command releases.
TEST_F(Timing, ReleaseWithinTheLeaseIsRefusedAndTheRequestRunsOnce) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "4s"}, {"LEASE", "8s"}}));
  const std::string key = unique_key("release-in-lease");
  auto first = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Delay-Ms", "2000"), 10s);
  });
  while (rig.upstream_count(key) == 0) std::this_thread::sleep_for(10ms);

  const RunResult refused = rig.release("lock", key);
  EXPECT_EQ(refused.exit_status, 4) << refused.stdout_text << refused.stderr_text;
  EXPECT_NE(refused.stderr_text.find("lease runs for"), std::string::npos) << refused.stderr_text;
  EXPECT_EQ(rig.inspect("lock", key).state, "in_flight");

  const HttpResponse answered = first.get();
  EXPECT_EQ(answered.status, 200) << describe(answered);
  const HttpResponse replayed = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(replayed.body, answered.body);
  EXPECT_EQ(rig.upstream_count(key), 1u) << "a release within the lease let the request run twice";
}

TEST_F(Timing, ReleaseAfterALapsedLeaseSucceeds) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", "5s"}}));
  const std::string key = unique_key("release-lapsed");
  // The proxy dies mid-request: the record stays in flight, its lease lapses.
  auto first = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Delay-Ms", "800"), 5s);
  });
  while (rig.upstream_count(key) == 0) std::this_thread::sleep_for(10ms);
  rig.kill_proxy();
  first.get();
  rig.start_proxy();
  EXPECT_EQ(rig.release("lock", key).exit_status, 4) << "released within the lease";
  std::this_thread::sleep_for(5200ms);  // past the 5 s lease, counted from the claim
  const RunResult released = rig.release("lock", key);
  EXPECT_EQ(released.exit_status, 0) << released.stdout_text << released.stderr_text;
  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(retried.status, 200) << describe(retried);
  EXPECT_EQ(rig.upstream_count(key), 2u);
}

// Expiry does not end "never executed twice": a record marked unknown keeps answering 502 past
// its ttl (for unknown_retention, default 7 days), and the reaper leaves it alone meanwhile.
TEST_F(Timing, AnUnknownOutcomeStillAnswers502AfterItsTtl) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", "5s"}, {"TTL", "6s"}, {"REAPER_INTERVAL", "200ms"}}));
  const std::string key = unique_key("unknown-past-ttl");
  const HttpResponse timed_out = send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Hang", "1"));
  EXPECT_EQ(timed_out.status, 504) << describe(timed_out);
  std::this_thread::sleep_for(6500ms);  // past the ttl; the reaper ran dozens of times
  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(retried.status, 502) << describe(retried);
  EXPECT_EQ(problem_slug(retried), "outcome-unknown") << describe(retried);
  EXPECT_EQ(rig.inspect("lock", key).state, "unknown");
  EXPECT_EQ(rig.upstream_count(key), 1u) << "an unknown outcome ran again after its ttl";
}

}  // namespace
}  // namespace idem::test::failure
