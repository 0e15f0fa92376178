// idemproxy on HA Postgres, with real processes: a multi-host DSN (postgresql://h1:p1,h2:p2/db?
// target_session_attrs=read-write) whose first host refuses connections or is read-only, and a
// primary that turns read-only under a running proxy (25006, what a demoted primary or a standby
// reached through a stale address answers). The replication-mode warning fires against a cluster
// without standbys. Private clusters per test: they are made read-only.

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/blocking_pg.hpp"
#include "support/eventually.hpp"
#include "support/ports.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs one statement on a fresh session; throws with the server's message on failure.
void admin_sql(const std::string& dsn, const std::string& sql) { BlockingPg(dsn).execute(sql); }

// The whole server read-only, as a standby is: every session's transactions from its next one on
// (ALTER SYSTEM + reload), and the sessions already open ended so that none keeps the old default
// (an idle backend applies a reload only after its next statement).
void make_read_only(const std::string& dsn, bool read_only) {
  admin_sql(dsn, read_only ? "ALTER SYSTEM SET default_transaction_read_only = on"
                           : "ALTER SYSTEM RESET default_transaction_read_only");
  admin_sql(dsn, "SELECT pg_reload_conf()");
  std::this_thread::sleep_for(300ms);
  if (read_only) {
    admin_sql(dsn,
              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
              "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
  }
}

std::string host_port(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// The URI form users write for an HA formation: every node, the primary found by libpq.
std::string multi_host_uri(std::uint16_t first, std::uint16_t second) {
  return "postgresql://" + host_port(first) + "," + host_port(second) +
         "/postgres?user=postgres&target_session_attrs=read-write&connect_timeout=2";
}

class HaPostgres : public FailureTest {
 protected:
  // A fresh key on /lock executes once; its retry replays byte for byte.
  void expect_executes_once_and_replays(ProxyRig& rig, const std::string& label) {
    const std::string key = unique_key(label);
    const HttpResponse first = send_while_refused(rig.proxy_port(), keyed_post("/lock", key), Clock::now() + 10s);
    ASSERT_EQ(first.status, 200) << describe(first);
    EXPECT_FALSE(is_replay(first));
    const HttpResponse again = send(rig.proxy_port(), keyed_post("/lock", key));
    EXPECT_EQ(again.status, 200) << describe(again);
    EXPECT_TRUE(is_replay(again)) << describe(again);
    EXPECT_EQ(again.body, first.body);
    EXPECT_EQ(rig.upstream_count(key), 1u);
  }
};

TEST_F(HaPostgres, MultiHostDsnWhoseFirstHostRefusesConnectionsExecutesOnceAndReplays) {
  PrivatePostgres& postgres = start_private_postgres();
  ProxyRig& rig = start_rig(rig_options({}, multi_host_uri(free_port(), postgres.port())));
  expect_executes_once_and_replays(rig, "multi-host-refused");
  // No standby behind this cluster: the proxy says that a failover could lose a commit.
  EXPECT_TRUE(eventually(
      [&] { return rig.proxy_logs().find("\"event\":\"store_replication_asynchronous\"") != std::string::npos; }, 15s))
      << rig.proxy_logs();
  EXPECT_NE(rig.proxy_logs().find("can be lost on failover"), std::string::npos);
}

TEST_F(HaPostgres, ReadWriteTargetSkipsAReadOnlyFirstHost) {
  PrivatePostgres& standby_like = start_private_postgres();
  make_read_only(standby_like.dsn(), true);
  PrivatePostgres writable;
  ProxyRig& rig = start_rig(rig_options({}, multi_host_uri(standby_like.port(), writable.port())));
  // A claim can only have been stored on the writable node: the read-only one refuses every write.
  expect_executes_once_and_replays(rig, "multi-host-read-only-first");
  EXPECT_EQ(rig.proxy_logs().find("25006"), std::string::npos) << "a statement reached the read-only node";
}

TEST_F(HaPostgres, PrimaryTurningReadOnlyAnswers503StoreUnavailableExecutesNothingAndRecovers) {
  PrivatePostgres& postgres = start_private_postgres();
  // No target_session_attrs: a node reached through an address that no longer leads to the
  // primary, so the statements themselves meet the read-only server.
  ProxyRig& rig = start_rig(rig_options({}, postgres.dsn()));
  const std::uint16_t port = rig.proxy_port();
  const std::string before = unique_key("before-read-only");
  const HttpResponse stored = send(port, keyed_post("/lock", before));
  ASSERT_EQ(stored.status, 200) << describe(stored);

  make_read_only(postgres.dsn(), true);
  std::vector<std::string> refused;
  for (int i = 0; i < 6; ++i) {
    const std::string key = unique_key("while-read-only");
    const HttpResponse response = send(port, keyed_post("/lock", key));
    EXPECT_EQ(response.status, 503) << describe(response);
    EXPECT_EQ(problem_slug(response), "store-unavailable") << describe(response);
    EXPECT_GE(retry_after_seconds(response).value_or(0), 1) << describe(response);
    EXPECT_EQ(rig.upstream_count(key), 0u) << "a refused request reached the upstream";
    refused.push_back(key);
  }
  // fail_open too: the store is reached, only not writable, so fail_open does not apply.
  const std::string open_key = unique_key("open-while-read-only");
  const HttpResponse open = send(port, keyed_post("/open", open_key));
  EXPECT_EQ(open.status, 503) << describe(open);
  EXPECT_EQ(rig.upstream_count(open_key), 0u);
  const std::string logs = rig.proxy_logs();
  EXPECT_NE(logs.find("(read_only, SQLSTATE 25006)"), std::string::npos) << "the named error is not logged:\n" << logs;
  EXPECT_NE(logs.find("connection closed after read_only"), std::string::npos) << logs;

  make_read_only(postgres.dsn(), false);
  for (const std::string& key : refused) {
    const HttpResponse retried = send_while_refused(port, keyed_post("/lock", key), Clock::now() + 15s);
    EXPECT_EQ(retried.status, 200) << describe(retried);
    EXPECT_FALSE(is_replay(retried));
    EXPECT_EQ(rig.upstream_count(key), 1u);
  }
  const HttpResponse replayed = send_while_refused(port, keyed_post("/lock", before), Clock::now() + 15s);
  EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(replayed.body, stored.body);
  EXPECT_EQ(rig.upstream_count(before), 1u);
  EXPECT_EQ(rig.proxy_starts(), 1);
}

// A primary turning read-only while the proxy's sessions stay connected (a demotion: every
// statement meets 25006) on a fail_open route: the store was reached, so it fails closed, 503
// store-unavailable, and nothing is forwarded unchecked (before, 25006 counted as "no connection"
// and every such request ran unprotected). Once writable, each refused key executes once.
TEST_F(HaPostgres, ReadOnlyPrimaryOnAFailOpenRouteIs503AndForwardsNothing) {
  PrivatePostgres& postgres = start_private_postgres();
  ProxyRig& rig = start_rig(rig_options({}, postgres.dsn()));
  const std::uint16_t port = rig.proxy_port();
  const HttpResponse warm = send(port, keyed_post("/open", unique_key("open-writable")));
  ASSERT_EQ(warm.status, 200) << describe(warm);

  // Every session's next transaction read-only, sessions kept: a reload reaches the idle backends
  // before their next statement runs. Known once a fresh session reads the new default.
  admin_sql(postgres.dsn(), "ALTER SYSTEM SET default_transaction_read_only = on");
  admin_sql(postgres.dsn(), "SELECT pg_reload_conf()");
  ASSERT_TRUE(eventually(
      [&] {
        return BlockingPg(postgres.dsn()).scalar("SHOW default_transaction_read_only") ==
               std::optional<std::string>("on");
      },
      5s))
      << "the reload never took";

  std::vector<std::string> refused;
  for (int i = 0; i < 4; ++i) {
    const std::string key = unique_key("open-while-read-only");
    const HttpResponse response = send(port, keyed_post("/open", key));
    EXPECT_EQ(response.status, 503) << describe(response);
    EXPECT_EQ(problem_slug(response), "store-unavailable") << describe(response);
    EXPECT_FALSE(response.header("Idempotency-Status").has_value()) << describe(response);
    EXPECT_EQ(rig.upstream_count(key), 0u) << "a fail_open request was forwarded while the store refused writes";
    refused.push_back(key);
  }
  EXPECT_NE(rig.proxy_logs().find("(read_only, SQLSTATE 25006)"), std::string::npos)
      << "the claims never met the read-only server:\n"
      << rig.proxy_logs();

  make_read_only(postgres.dsn(), false);
  for (const std::string& key : refused) {
    const HttpResponse retried = send_while_refused(port, keyed_post("/open", key), Clock::now() + 15s);
    EXPECT_EQ(retried.status, 200) << describe(retried);
    EXPECT_FALSE(retried.header("Idempotency-Status").has_value())
        << "not checked once writable: " << describe(retried);
    EXPECT_EQ(rig.upstream_count(key), 1u);
  }
}

}  // namespace
}  // namespace idem::test::failure
