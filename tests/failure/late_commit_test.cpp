// Claims that commit after the proxy gave up on them, with real processes. The proxy's sessions
// run synchronous_commit = on; with synchronous_standby_names naming a standby that never comes
// (as while an HA manager has not yet dropped a lost standby from synchronous replication), every
// commit waits: the claim's reply never comes, the proxy answers 503 at its query timeout and
// releases the claim by owner token. The release cannot see the claim's uncommitted row, so it
// fences the owner. When the standby requirement is lifted, the claim commits: an in-flight record
// of a request that never ran. The promise: no retry, at this proxy or another replica, ever reads
// it as in flight or as an unknown outcome; once the store answers again, the key executes once,
// then replays. Each test runs on a private cluster (the setting stalls every writer on it), directly
// and through PgBouncer in transaction pooling mode.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/blocking_pg.hpp"
#include "support/eventually.hpp"
#include "support/private_pgbouncer.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Every commit on the cluster waits for a standby named 'phantom' (none ever connects), or no more.
// ALTER SYSTEM and pg_reload_conf() write no transaction of their own, so neither waits.
void require_phantom_standby(const std::string& dsn, bool required) {
  BlockingPg admin(dsn);
  admin.execute(required ? "ALTER SYSTEM SET synchronous_standby_names = 'phantom'"
                         : "ALTER SYSTEM RESET synchronous_standby_names");
  admin.execute("SELECT pg_reload_conf()");
  // Backends learn of the change from the checkpointer, right after it handles the reload.
  std::this_thread::sleep_for(500ms);
}

std::string statuses_text(const std::multiset<std::string>& seen) {
  std::string text;
  for (const auto& answer : seen) text += answer + " ";
  return text;
}

// "503 store-unavailable", "200", ...: what one answer was.
std::string answer_of(const HttpResponse& response) {
  const std::string slug = problem_slug(response);
  return std::to_string(response.status) + (slug.empty() ? "" : " " + slug);
}

struct Scenario {
  std::chrono::milliseconds hold;  // how long commits wait for the phantom standby
  bool through_pgbouncer = false;
  // The proxy that gave up is killed (-9) once its release is stuck in the server too, and the
  // retries go to a second replica: nothing but the fence the stuck release leaves can free the
  // key (the proxy's own background release would otherwise delete the late record, if it ran
  // after the commit).
  bool giving_up_proxy_dies = false;
};

class LateCommit : public FailureTest {
 protected:
  void run(const Scenario& scenario) {
    PrivatePostgres& postgres = start_private_postgres(CommitMode::synchronous);
    std::unique_ptr<PrivatePgBouncer> pgbouncer;
    if (scenario.through_pgbouncer) pgbouncer = std::make_unique<PrivatePgBouncer>(postgres.port());
    const std::string dsn = pgbouncer ? pgbouncer->dsn() : postgres.dsn();
    // Lease 5 s (the rig's default, the shortest its timeouts allow): "past the lease" is a 7 s hold.
    ProxyRig& first = start_rig(rig_options({}, dsn));
    std::unique_ptr<ProxyRig> second;
    if (scenario.giving_up_proxy_dies) {
      RigOptions options = rig_options({}, dsn);
      const std::uint16_t shared_upstream = first.upstream_port();
      options.route_upstream = [shared_upstream](std::uint16_t) { return shared_upstream; };
      second = std::make_unique<ProxyRig>(std::move(options));
      second->start();
    }
    ProxyRig& retried_at = second ? *second : first;
    // Both proxies' pools connected and the schema in place: one keyed request each runs.
    for (ProxyRig* rig : {&first, second.get()}) {
      if (rig == nullptr) continue;
      const HttpResponse warm =
          send_while_refused(rig->proxy_port(), keyed_post("/lock", unique_key("warm")), Clock::now() + 15s);
      ASSERT_EQ(warm.status, 200) << describe(warm) << rig->diagnostics();
    }

    const std::string key = unique_key("late-commit");
    const HttpRequest request = keyed_post("/lock", key);
    require_phantom_standby(postgres.dsn(), true);
    const HttpResponse given_up = send(first.proxy_port(), request);
    EXPECT_EQ(given_up.status, 503) << describe(given_up);
    EXPECT_EQ(problem_slug(given_up), "store-unavailable") << describe(given_up);
    if (scenario.giving_up_proxy_dies) {
      // Its release found nothing to delete (the claim is uncommitted) and waits to commit its fence.
      ASSERT_TRUE(eventually([&] { return first.proxy_logs().find("release timed out") != std::string::npos; }, 10s))
          << first.diagnostics();
      first.kill_proxy();
    }

    // Retries while every commit still waits: the store cannot answer, and nothing else may be said.
    std::multiset<std::string> while_held;
    const auto held_until = Clock::now() + scenario.hold;
    while (Clock::now() < held_until) {
      while_held.insert(answer_of(send(retried_at.proxy_port(), request)));
      std::this_thread::sleep_for(400ms);
    }
    require_phantom_standby(postgres.dsn(), false);
    const auto lifted_at = Clock::now();

    // The late claim has committed now (and so has the fence). Retries until the key executes.
    std::multiset<std::string> after;
    HttpResponse executed;
    while (Clock::now() - lifted_at < 15s) {
      executed = send(retried_at.proxy_port(), request);
      after.insert(answer_of(executed));
      if (executed.status == 200) break;
      std::this_thread::sleep_for(100ms);
    }
    const auto settled_ms = elapsed_ms(lifted_at);
    ASSERT_EQ(executed.status, 200) << "while held: " << statuses_text(while_held)
                                    << "\nafter: " << statuses_text(after) << "\n"
                                    << retried_at.diagnostics() << postgres.log_tail();
    EXPECT_FALSE(is_replay(executed)) << "the first execution is this retry's";
    EXPECT_LT(settled_ms, 5'000) << "the key stayed locked after the late commit";
    for (const auto& answer : while_held) EXPECT_EQ(answer, "503 store-unavailable") << "while held";
    for (const auto& answer : after) {
      EXPECT_TRUE(answer == "200" || answer == "503 store-unavailable")
          << "after the late commit, a retry was told: " << answer << " (all: " << statuses_text(after) << ")";
    }

    // Executed exactly once, counted by the upstream; every later retry, at each live proxy, replays.
    EXPECT_EQ(first.upstream_count(key), 1u);
    for (ProxyRig* rig : {&first, second.get()}) {
      if (rig == nullptr || (rig == &first && scenario.giving_up_proxy_dies)) continue;
      const HttpResponse replay = send_until_settled(rig->proxy_port(), request, 10s);
      EXPECT_EQ(replay.status, 200) << describe(replay);
      EXPECT_TRUE(is_replay(replay)) << describe(replay);
      EXPECT_EQ(replay.body, executed.body);
    }
    EXPECT_EQ(first.upstream_count(key), 1u);
  }
};

TEST_F(LateCommit, AClaimCommittedTwoSecondsLateNeverLocksItsKey) { run({.hold = 2s}); }

TEST_F(LateCommit, AClaimCommittedPastItsLeaseIsNeverAnUnknownOutcome) { run({.hold = 7s}); }

TEST_F(LateCommit, AnotherReplicaNeverReadsTheLateClaimAsInFlightOrUnknown) {
  run({.hold = 7s, .giving_up_proxy_dies = true});
}

TEST_F(LateCommit, ThroughPgBouncerTheLateClaimNeverLocksItsKey) {
  run({.hold = 7s, .through_pgbouncer = true, .giving_up_proxy_dies = true});
}

}  // namespace
}  // namespace idem::test::failure
