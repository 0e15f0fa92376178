// Whether an acknowledged commit survives a failover, from synchronous_commit and
// synchronous_standby_names (core/replication_mode.hpp).
#include "core/replication_mode.hpp"

#include <gtest/gtest.h>

namespace idem::core {
namespace {

ReplicationMode mode(std::string commit, std::string standbys) {
  return replication_mode(ReplicationSettings{std::move(commit), std::move(standbys)});
}

TEST(ReplicationMode, NoStandbyNamedIsAsynchronousWhateverTheCommitSetting) {
  for (const char* commit : {"on", "remote_apply", "remote_write", "local", "off"}) {
    EXPECT_EQ(mode(commit, ""), ReplicationMode::asynchronous) << commit;
    EXPECT_EQ(mode(commit, "  "), ReplicationMode::asynchronous) << commit;
  }
}

TEST(ReplicationMode, AStandbyNamedAndACommitThatWaitsIsSynchronous) {
  for (const char* commit : {"on", "ON", "true", "yes", "1", "remote_apply", "remote_write"}) {
    EXPECT_EQ(mode(commit, "ANY 1 (pgautofailover_standby_2)"), ReplicationMode::synchronous) << commit;
  }
  EXPECT_EQ(mode("on", "*"), ReplicationMode::synchronous);
  EXPECT_EQ(mode("on", "FIRST 1 (node_b, node_c)"), ReplicationMode::synchronous);
}

TEST(ReplicationMode, ACommitThatDoesNotWaitIsAsynchronousEvenWithStandbysNamed) {
  for (const char* commit : {"local", "off", "false", "0", ""}) {
    EXPECT_EQ(mode(commit, "ANY 1 (standby)"), ReplicationMode::asynchronous) << commit;
  }
}

TEST(ReplicationMode, NamesAndMeanings) {
  EXPECT_EQ(replication_mode_name(ReplicationMode::synchronous), "synchronous");
  EXPECT_EQ(replication_mode_name(ReplicationMode::asynchronous), "asynchronous");
  EXPECT_NE(replication_mode_meaning(ReplicationMode::asynchronous).find("can be lost on failover"), std::string_view::npos);
}

}  // namespace
}  // namespace idem::core
