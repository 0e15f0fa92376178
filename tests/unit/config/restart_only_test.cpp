// The restart-only settings (marked in config.hpp): a reload names the ones the file changed and
// keeps their running values, while the rest of the file goes into force.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config_loader.hpp"

namespace idem::config {
namespace {

using namespace std::chrono_literals;

TEST(RestartOnly, ChangesAreNamedInConfigOrder) {
  const Config running;
  Config next = running;
  next.reaper.batch = running.reaper.batch * 2;
  next.store.redis.host = "10.0.0.7";
  next.listen.port = 8081;
  EXPECT_EQ(restart_only_changes(running, next), (std::vector<std::string>{"listen", "store", "reaper"}));
  EXPECT_TRUE(restart_only_changes(running, running).empty());
}

TEST(RestartOnly, KeepsTheRunningValuesAndTakesTheRest) {
  Config running;
  running.admin.port = 9191;
  Config next = running;
  next.admin.port = 9292;
  next.store.postgres.query_timeout = 9s;
  next.reaper.batch = 1;
  next.limits.header_timeout = 3s;
  next.log.access = false;
  const Config kept = keep_restart_only(next, running);
  EXPECT_EQ(kept.admin.port, 9191);
  EXPECT_EQ(kept.store.postgres.query_timeout, running.store.postgres.query_timeout);
  EXPECT_EQ(kept.reaper.batch, running.reaper.batch);
  EXPECT_EQ(kept.limits.header_timeout, 3s);
  EXPECT_FALSE(kept.log.access);
}

}  // namespace
}  // namespace idem::config
