// migrate(): applies the embedded schema once, in one transaction, safely from several migrators.
// Each test works on a database of its own, created and dropped here.
#include <thread>

#include "integration/pg_test_env.hpp"
#include "pg/migrate.hpp"
#include "store/pg/migrations.hpp"

namespace idem::test {
namespace {

class Migrate : public PgTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PgTest::SetUp());
    admin_ = std::make_unique<BlockingPg>(dsn());
    ASSERT_TRUE(admin_->ok()) << admin_->error();
    database_ = fresh_name("idem_migrate_");
    ASSERT_TRUE(admin_->try_column("CREATE DATABASE " + database_)) << admin_->error();
    database_dsn_ = dsn_with(dsn(), "dbname", database_);
  }
  void TearDown() override {
    if (admin_ && !database_.empty()) {
      EXPECT_TRUE(admin_->try_column("DROP DATABASE IF EXISTS " + database_ + " WITH (FORCE)")) << admin_->error();
    }
  }

  int latest_version() const { return store::pg::embedded_migrations().back().version; }
  int migration_count() const { return static_cast<int>(store::pg::embedded_migrations().size()); }

  std::unique_ptr<BlockingPg> admin_;
  std::string database_;
  std::string database_dsn_;
};

TEST_F(Migrate, SecondRunAppliesNothing) {
  const pg::MigrateResult first = store::pg::migrate(database_dsn_);
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_EQ(first.applied, migration_count());
  EXPECT_EQ(first.schema_version, latest_version());

  const pg::MigrateResult second = store::pg::migrate(database_dsn_);
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_EQ(second.applied, 0);
  EXPECT_EQ(second.schema_version, latest_version());

  BlockingPg client(database_dsn_);
  ASSERT_TRUE(client.ok()) << client.error();
  const auto versions = client.try_column("SELECT version::text FROM schema_migrations ORDER BY version");
  ASSERT_TRUE(versions) << client.error();
  EXPECT_EQ(static_cast<int>(versions->size()), migration_count());
  const auto columns = client.try_column(
      "SELECT column_name::text FROM information_schema.columns WHERE table_name = 'idempotency_records' "
      "ORDER BY ordinal_position");
  ASSERT_TRUE(columns) << client.error();
  EXPECT_EQ(*columns, (std::vector<std::string>{"scope", "key", "fingerprint", "state", "owner", "created_at",
                                                "lease_expires_at", "completed_at", "expires_at", "response_status",
                                                "response_headers", "response_body"}));
  // The state CHECK is part of the schema.
  EXPECT_FALSE(client.try_column("INSERT INTO idempotency_records (scope, key, fingerprint, state, owner, created_at, "
                           "expires_at) VALUES ('s', 'k', 'f', 'bogus', 'o', now(), now())"));
}

TEST_F(Migrate, ConcurrentMigratorsAllSucceedAndApplyOnce) {
  constexpr int kMigrators = 4;
  std::vector<pg::MigrateResult> results(kMigrators);
  std::vector<std::thread> threads;
  for (int i = 0; i < kMigrators; ++i) {
    threads.emplace_back([&, i] { results[i] = store::pg::migrate(database_dsn_); });
  }
  for (std::thread& thread : threads) thread.join();

  int applied = 0;
  for (const pg::MigrateResult& result : results) {
    EXPECT_TRUE(result.ok) << result.error;
    EXPECT_EQ(result.schema_version, latest_version());
    applied += result.applied;
  }
  EXPECT_EQ(applied, migration_count());  // one migrator did the work, the others found it done
}

TEST_F(Migrate, UnreachableServerIsAnErrorNotACrash) {
  const pg::MigrateResult result =
      store::pg::migrate(dsn_with(dsn_with(dsn(), "host", "127.0.0.1"), "port", std::to_string(closed_port())));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.applied, 0);
  EXPECT_NE(result.error.find("connect"), std::string::npos) << result.error;
}

}  // namespace
}  // namespace idem::test
