// The driver on HA Postgres: a multi-host DSN tried host by host (a refused first host, a
// read-only first host skipped by target_session_attrs=read-write), a statement refused as
// read-only (25006: what a primary turned standby answers) named `read_only`, mapped to
// StoreError::unavailable and closing its connection, and the replication-mode watch.
#include <atomic>
#include <memory>
#include <thread>

#include "integration/pg_test_env.hpp"
#include "pg/counters.hpp"
#include "pg/pool.hpp"
#include "pg/replication_watch.hpp"
#include "store/pg/store_error.hpp"
#include "support/blocking_pg.hpp"
#include "support/private_postgres.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;

pg::PoolOptions pool_options(std::string dsn) {
  return {.dsn = std::move(dsn), .size = 1, .connect_timeout = 2s, .query_timeout = 2s, .acquire_timeout = 2s};
}

struct Outcome {
  std::optional<pg::PgError> error;
  std::string first_value;
};

// Runs `sql` on `pool` and the loop until it ended; the first column of the first row as text.
Outcome run_sql(boost::asio::io_context& io, pg::Pool& pool, const char* sql) {
  auto outcome = std::make_shared<Outcome>();
  pool.execute(std::make_shared<const pg::Statement>(pg::Statement{"ha_probe", sql, {}}),
               [outcome](pg::PgError error, pg::ResultHandle result) {
                 if (error.ok() && PQntuples(result.get()) > 0) {
                   outcome->first_value.assign(PQgetvalue(result.get(), 0, 0),
                                               static_cast<std::size_t>(PQgetlength(result.get(), 0, 0)));
                 }
                 outcome->error = std::move(error);
               });
  EXPECT_TRUE(run_until(io, [&] { return outcome->error.has_value(); })) << "the statement never ended";
  return *outcome;
}

// The server's port, read through the pool's own session.
constexpr const char* kServerPort = "SELECT current_setting('port')";

class HaDriver : public PgTest {};

TEST_F(HaDriver, MultiHostDsnSkipsARefusedFirstHost) {
  boost::asio::io_context io(1);
  BlockingPg client(dsn());
  const std::string port = client.scalar(kServerPort).value_or("");
  ASSERT_FALSE(port.empty());
  const std::string refused = std::to_string(closed_port());
  const std::string multi = dsn_with(dsn_with(dsn_with(dsn(), "host", "127.0.0.1,127.0.0.1"), "port", refused + "," + port),
                                     "target_session_attrs", "read-write");
  auto pool = std::make_shared<pg::Pool>(io, pool_options(multi));
  pool->start();
  const Outcome outcome = run_sql(io, *pool, kServerPort);
  ASSERT_TRUE(outcome.error && outcome.error->ok()) << (outcome.error ? outcome.error->message : "");
  EXPECT_EQ(outcome.first_value, port);
}

// Read-only is a store reached but not usable (busy), never `unavailable`: fail_open applies only
// when no connection could be made, and a demoted primary took ours.
TEST_F(HaDriver, ReadOnlyRefusalIsBusyToTheStoreNotUnavailableAndClosesTheConnection) {
  boost::asio::io_context io(1);
  // Every transaction of this session read-only: what a standby (or a demoted primary) answers.
  auto pool = std::make_shared<pg::Pool>(io, pool_options(dsn_with(dsn(), "options", "-c default_transaction_read_only=on")));
  pool->start();
  ASSERT_TRUE(run_until(io, [&] { return pool->connected(); })) << "never connected";
  const auto connects_before = pg::pg_counters().connects_succeeded.load();
  const Outcome refused = run_sql(io, *pool, "CREATE TABLE ha_driver_read_only_probe (id int)");
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->kind, pg::PgErrorKind::read_only) << refused.error->message;
  EXPECT_EQ(refused.error->sqlstate, "25006");
  EXPECT_EQ(pg::pg_error_kind_name(refused.error->kind), "read_only");
  EXPECT_EQ(store::pg::to_store_error(refused.error->kind), core::StoreError::busy);
  // The connection was dropped: the pool connects a new one (on a failover: to the new primary).
  EXPECT_TRUE(run_until(io, [&] { return pg::pg_counters().connects_succeeded.load() > connects_before; }, 5s))
      << "the connection that answered 25006 was kept";
}

TEST_F(HaDriver, ReadWriteTargetRefusesAReadOnlyServer) {
  boost::asio::io_context io(1);
  const std::string read_only = dsn_with(dsn_with(dsn(), "options", "-c default_transaction_read_only=on"),
                                         "target_session_attrs", "read-write");
  auto pool = std::make_shared<pg::Pool>(io, pool_options(read_only));
  pool->start();
  const Outcome outcome = run_sql(io, *pool, kServerPort);
  ASSERT_TRUE(outcome.error.has_value());
  EXPECT_EQ(outcome.error->kind, pg::PgErrorKind::unavailable) << outcome.error->message;
}

// Reads the settings through a fresh pool on `server_dsn` until the gauge is known.
int watched_gauge(const std::string& server_dsn) {
  boost::asio::io_context io(1);
  auto pool = std::make_shared<pg::Pool>(io, pool_options(server_dsn));
  pool->start();
  std::atomic<int> gauge{-1};
  auto watch = std::make_shared<pg::ReplicationWatch>(
      io, [pool](pg::ReplicationSettingsHandler handler) { pg::read_replication_settings(*pool, std::move(handler)); },
      gauge);
  watch->start();
  EXPECT_TRUE(run_until(io, [&] { return gauge.load() != -1; }, 15s)) << "the replication mode never became known";
  watch->stop();
  pool->stop();
  return gauge.load();
}

TEST(HaReplicationWatch, GaugeIsZeroWithoutStandbysAndOneWithSynchronousStandbyNames) {
  PrivatePostgres postgres;
  EXPECT_EQ(watched_gauge(postgres.dsn()), 0);
  const pg::ReplicationCheck before = pg::check_replication_settings(postgres.dsn(), 2s);
  ASSERT_TRUE(before.settings) << before.error;
  EXPECT_EQ(before.settings->synchronous_commit, "on") << "our sessions ask for synchronous_commit=on";
  EXPECT_EQ(before.settings->synchronous_standby_names, "");

  // A standby named (none exists: only settings are read here, nothing commits and waits for it).
  BlockingPg admin(postgres.dsn());
  admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (standby_a)'");
  admin.execute("SELECT pg_reload_conf()");
  std::this_thread::sleep_for(300ms);  // the postmaster re-reads the file; new sessions see it
  EXPECT_EQ(watched_gauge(postgres.dsn()), 1);
  const pg::ReplicationCheck after = pg::check_replication_settings(postgres.dsn(), 2s);
  ASSERT_TRUE(after.settings) << after.error;
  EXPECT_EQ(after.settings->synchronous_standby_names, "ANY 1 (standby_a)");
  EXPECT_NE(pg::describe_replication(*after.settings).find("synchronous replication"), std::string::npos);

  // Unreachable: no settings, an error, and no exception.
  const pg::ReplicationCheck nowhere =
      pg::check_replication_settings("host=127.0.0.1 port=" + std::to_string(closed_port()) + " dbname=none", 2s);
  EXPECT_FALSE(nowhere.settings);
  EXPECT_FALSE(nowhere.error.empty());
}

}  // namespace
}  // namespace idem::test
