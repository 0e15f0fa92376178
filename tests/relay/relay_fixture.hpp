#pragma once
// gtest fixture of the relay process tests: an outbox schema of the test's own, a directory for
// configs and process logs, and per-test stream names on the suite's Redis (dropped afterwards).
// The schema lives on the suite's Postgres, or on a private cluster for tests that crash and
// restart the database under the relay (its log is printed when such a test fails).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "relay/relay_env.hpp"
#include "support/private_postgres.hpp"
#include "support/temp_dir.hpp"

namespace idem::test::relay {

enum class RelayDatabase { suite, private_cluster };

class RelayFixture : public ::testing::Test {
 protected:
  explicit RelayFixture(RelayDatabase database = RelayDatabase::suite) : database_(database) {}

  void SetUp() override;
  void TearDown() override;

  std::string stream(const std::string& aggregate_type) const { return prefix_ + "." + aggregate_type; }
  std::int64_t unpublished();
  // Every row marked published within `timeout`.
  bool drained(std::chrono::milliseconds timeout);

  RelayDatabase database_;
  // Declared first, destroyed last: the schema is dropped while its server still runs.
  std::unique_ptr<PrivatePostgres> postgres_;  // RelayDatabase::private_cluster only
  std::unique_ptr<OutboxSchema> schema_;
  std::unique_ptr<TempDir> dir_;
  std::string prefix_;
  RelaySettings settings_;
  std::unique_ptr<RedisClient> redis_;
};

}  // namespace idem::test::relay
