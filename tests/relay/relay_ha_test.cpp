// idemrelay on HA Postgres: a multi-host DSN whose first host refuses connections, the replication
// mode on /metrics and --check, and a server that turns read-only under the relay (25006, what a
// demoted primary answers): the relay backs off, loses nothing, and afterwards publishes every
// row exactly once, in order per aggregate. A private cluster per test: it is made read-only.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <thread>

#include "relay/relay_env.hpp"
#include "relay/relay_fixture.hpp"
#include "support/blocking_pg.hpp"
#include "support/eventually.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/redis_client.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

constexpr int kRowsPerAggregate = 10;

class RelayHaPostgres : public RelayFixture {
 protected:
  RelayHaPostgres() : RelayFixture(RelayDatabase::private_cluster) {}

  void insert_rows(std::initializer_list<const char*> aggregates) {
    for (const char* aggregate : aggregates) schema_->insert("order", aggregate, kRowsPerAggregate);
  }
  // The whole server read-only as a standby is (ALTER SYSTEM + reload), and the sessions open
  // ended (an idle backend applies a reload only after its next statement); or writable again.
  void make_read_only(bool read_only) {
    BlockingPg admin(postgres_->dsn());
    admin.query(read_only ? "ALTER SYSTEM SET default_transaction_read_only = on"
                          : "ALTER SYSTEM RESET default_transaction_read_only");
    admin.query("SELECT pg_reload_conf()");
    std::this_thread::sleep_for(300ms);
    if (read_only) {
      admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
          "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
    }
  }
  void expect_each_event_once_in_order(std::size_t expected) {
    const auto entries = read_stream(*redis_, stream("order"));
    const StreamAudit result = audit(entries);
    EXPECT_EQ(entries.size(), expected);
    EXPECT_EQ(result.copies.size(), expected);
    for (const auto& [id, copies] : result.copies) EXPECT_EQ(copies, 1) << "event " << id;
    EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  }
};

TEST_F(RelayHaPostgres, MultiHostDsnWithARefusedFirstHostDrainsAndReportsTheReplicationMode) {
  // key=value: the later host/port win over the schema DSN's; the refused node is tried first.
  settings_.dsn = schema_->dsn() + " host=127.0.0.1,127.0.0.1 port=" + std::to_string(free_port()) + "," +
                  std::to_string(postgres_->port()) + " target_session_attrs=read-write";
  settings_.admin_port = free_port();
  insert_rows({"m1", "m2"});
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(20s)) << relay.describe();
  ASSERT_TRUE(wait_for_port(settings_.admin_port, 5s)) << relay.describe();
  // No standby: asynchronous, so the gauge reads 0 once known, and the warning is in the log.
  EXPECT_TRUE(eventually(
      [&] {
        return send(settings_.admin_port, HttpRequest::get("/metrics"), 2s)
                   .body.find("idemrelay_store_synchronous_replication 0") != std::string::npos;
      },
      15s))
      << send(settings_.admin_port, HttpRequest::get("/metrics"), 2s).body;
  EXPECT_NE(relay.stderr_text().find("\"event\":\"store_replication_asynchronous\""), std::string::npos)
      << relay.stderr_text();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
  expect_each_event_once_in_order(2 * kRowsPerAggregate);

  const RunResult check = runner.run({"--check"});
  EXPECT_EQ(check.exit_status, 0) << check.stdout_text << check.stderr_text;
  EXPECT_NE(check.stdout_text.find("postgres: asynchronous replication"), std::string::npos) << check.stdout_text;
}

TEST_F(RelayHaPostgres, ServerTurningReadOnlyBacksOffThenDrainsEveryRowOnceInOrder) {
  insert_rows({"r1", "r2"});
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(20s)) << relay.describe();

  // Rows written while the relay is paused, then the server turns read-only under it.
  ASSERT_TRUE(relay.signal(SIGSTOP));
  insert_rows({"r1", "r2", "r3"});
  make_read_only(true);
  ASSERT_TRUE(relay.signal(SIGCONT));
  ASSERT_TRUE(eventually(
      [&] {
        return relay.stderr_text().find("SQLSTATE 25006") != std::string::npos ||
               relay.stderr_text().find("read_only") != std::string::npos;
      },
      10s))
      << relay.describe();
  std::this_thread::sleep_for(2s);  // read-only for a while: claims are refused, the relay backs off
  ASSERT_TRUE(relay.running()) << relay.describe();
  EXPECT_EQ(unpublished(), 3 * kRowsPerAggregate) << "a row was marked on a read-only server";
  EXPECT_NE(relay.stderr_text().find("\"event\":\"backing_off\""), std::string::npos) << relay.describe();

  make_read_only(false);
  ASSERT_TRUE(drained(30s)) << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
  expect_each_event_once_in_order(5 * kRowsPerAggregate);
  EXPECT_EQ(stopped_field(relay.stderr_text(), "duplicates"), 0);
}

}  // namespace
}  // namespace idem::test::relay
