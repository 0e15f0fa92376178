// The operator's command line: --version, and --migrate run by several pods at once against an
// empty database (the advisory lock makes all but one wait, then find the schema in place).
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "ops/ops_support.hpp"
#include "support/ports.hpp"
#include "support/process.hpp"
#include "support/proxy_launcher.hpp"
#include "support/temp_dir.hpp"

namespace idem::test::ops {
namespace {

constexpr std::chrono::seconds kCommandTimeout{60};
constexpr int kMigrators = 4;

TEST(OpsCli, VersionPrintsTheVersion) {
  TempDir dir("idem-ops-cli");
  const RunResult result = run_idemproxy({"--version"}, dir.path(), "version", kCommandTimeout);
  ASSERT_EQ(result.exit_status, 0) << result.stderr_text;
  EXPECT_TRUE(std::regex_match(result.stdout_text, std::regex(R"(idemproxy \d+\.\d+\.\d+\S*\n)")))
      << "'" << result.stdout_text << "'";
}

TEST(OpsCli, MigrateFromFourProcessesAtOnceOnAnEmptyDatabase) {
  TempDir dir("idem-ops-migrate");
  ScratchDatabase database;
  ProxyLauncher launcher(dir.path());
  launcher.write_config(default_config_template(), {{"PROXY_PORT", std::to_string(free_port())},
                                                    {"UPSTREAM_PORT", std::to_string(free_port())},
                                                    {"UPSTREAM_TIMEOUT", "5s"},
                                                    {"PG_DSN", yaml_quoted(database.dsn())}});
  std::vector<Process*> migrators;
  for (int i = 0; i < kMigrators; ++i) {
    migrators.push_back(&launcher.start("migrate-" + std::to_string(i), {"--migrate"}));
  }
  const std::regex summary(R"(idemproxy: schema at version (\d+) \((\d+) applied\)\n)");
  std::set<std::string> versions;
  int applied_by = 0;
  for (Process* migrator : migrators) {
    EXPECT_EQ(migrator->wait_exit(kCommandTimeout), 0) << migrator->describe();
    std::smatch match;
    const std::string out = migrator->stdout_text();
    ASSERT_TRUE(std::regex_match(out, match, summary)) << migrator->describe();
    versions.insert(match[1]);
    applied_by += match[2] != "0";
  }
  EXPECT_EQ(versions.size(), 1u) << "the migrators disagree on the schema version";
  EXPECT_NE(*versions.begin(), "0");
  EXPECT_EQ(applied_by, 1) << "exactly one migrator applies the schema; the others find it in place";
}

}  // namespace
}  // namespace idem::test::ops
