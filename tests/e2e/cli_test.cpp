// The command line: --check (config validation with file:line:col), --migrate, and shutdown on
// SIGTERM.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <regex>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "support/env.hpp"
#include "support/ports.hpp"
#include "support/process.hpp"
#include "support/proxy_launcher.hpp"
#include "support/temp_dir.hpp"

namespace idem::test::e2e {
namespace {

constexpr std::chrono::seconds kCommandTimeout{30};

class Cli : public ::testing::Test {
 protected:
  std::filesystem::path write_config(std::string_view name, std::string_view text) {
    const auto path = dir_.path() / std::string(name);
    write_file(path, text);
    return path;
  }

  RunResult run(std::vector<std::string> args) {
    return run_idemproxy(std::move(args), dir_.path() / "logs", "idemproxy", kCommandTimeout);
  }

  // The e2e config, valid, pointing at ports nothing listens on and at dsn.
  std::string valid_config(std::string_view dsn) const {
    return render_template(default_config_template(), {{"PROXY_PORT", std::to_string(free_port())},
                                                       {"UPSTREAM_PORT", std::to_string(free_port())},
                                                       {"UPSTREAM_TIMEOUT", "5s"},
                                                       {"PG_DSN", yaml_quoted(dsn)}});
  }

  TempDir dir_{"idem-cli"};
};

std::string output_of(const RunResult& result) { return result.stdout_text + result.stderr_text; }

// --check: a valid config exits 0. Validation needs no database (the DSN here leads nowhere): the
// replication mode is then reported as not checked, and the check still passes.
TEST_F(Cli, CheckAcceptsAValidConfigWhenTheDatabaseIsDown) {
  const auto path = write_config("good.yaml", valid_config("host=127.0.0.1 port=1 user=nobody dbname=none"));
  const auto result = run({"--config", path.string(), "--check"});
  ASSERT_TRUE(result.exit_status.has_value()) << "--check did not finish";
  EXPECT_EQ(*result.exit_status, 0) << output_of(result);
  EXPECT_NE(result.stdout_text.find("store: not reachable ("), std::string::npos) << output_of(result);
  EXPECT_NE(result.stdout_text.find("replication mode not checked"), std::string::npos) << output_of(result);
}

// --check against a reachable store prints its replication mode (the suite's cluster has no standby).
TEST_F(Cli, CheckPrintsTheReplicationModeOfAReachableStore) {
  const auto dsn = env_var("IDEMPROXY_TEST_PG_DSN");
  ASSERT_TRUE(dsn && !dsn->empty()) << "IDEMPROXY_TEST_PG_DSN is not set";
  const auto path = write_config("reachable.yaml", valid_config(*dsn));
  const auto result = run({"--config", path.string(), "--check"});
  ASSERT_TRUE(result.exit_status.has_value()) << "--check did not finish";
  EXPECT_EQ(*result.exit_status, 0) << output_of(result);
  EXPECT_NE(
      result.stdout_text.find("store: asynchronous replication (synchronous_commit=on, synchronous_standby_names='')"),
      std::string::npos)
      << output_of(result);
  EXPECT_NE(result.stdout_text.find("can be lost on failover"), std::string::npos) << output_of(result);
}

// --check: every problem is reported as file:line:col: message, and the exit status is non-zero.
TEST_F(Cli, CheckReportsEveryProblemWithFileLineAndColumn) {
  const auto path = write_config("bad.yaml",
                                 "listen: 127.0.0.1:18080\n"                                  // 1
                                 "upstream: { url: \"http://127.0.0.1:18081\" }\n"            // 2
                                 "store: { postgres: { dsn: \"host=127.0.0.1 port=1\" } }\n"  // 3
                                 "defaults: { ttl: forever, lease: 10s }\n"                   // 4: bad duration
                                 "routes:\n"                                                  // 5
                                 "  - match: { method: POST, path: /orders }\n"               // 6: no name
                                 "bogus_key: 1\n");                                           // 7: unknown key
  const auto result = run({"--config", path.string(), "--check"});
  ASSERT_TRUE(result.exit_status.has_value()) << "--check did not finish";
  EXPECT_NE(*result.exit_status, 0) << output_of(result);

  const std::string output = output_of(result);
  const std::regex issue("^" + std::regex_replace(path.string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                         R"(:(\d+):(\d+): (.+)$)");
  std::vector<int> lines;
  std::istringstream stream(output);
  for (std::string line; std::getline(stream, line);) {
    std::smatch match;
    if (!std::regex_match(line, match, issue)) continue;
    lines.push_back(std::stoi(match[1].str()));
    EXPECT_GE(std::stoi(match[2].str()), 1) << line;
  }
  const auto reported = [&](int line) { return std::find(lines.begin(), lines.end(), line) != lines.end(); };
  EXPECT_TRUE(reported(4)) << "bad duration on line 4 not reported:\n" << output;
  EXPECT_TRUE(reported(6)) << "route without a name on line 6 not reported:\n" << output;
  EXPECT_TRUE(reported(7)) << "unknown key on line 7 not reported:\n" << output;
}

// --check applies the timing model (README "Timing"): the issue's case, an https upstream with a
// 30 s timeout and a 1 s connect timeout under a 31 s lease, is refused with the budget spelled
// out at the lease's position.
TEST_F(Cli, CheckRefusesALeaseShorterThanTheLongestExchangeWithItsFormula) {
  const auto path =
      write_config("lease.yaml",
                   "listen: 127.0.0.1:18080\n"                                                               // 1
                   "upstream: { url: \"https://127.0.0.1:18081\", timeout: 30s, tls: { verify: false } }\n"  // 2
                   "store: { postgres: { dsn: \"host=127.0.0.1 port=1\" } }\n"                               // 3
                   "routes:\n"                                                                               // 4
                   "  - name: pay\n"                                                                         // 5
                   "    match: { method: POST, path: /pay }\n"                                               // 6
                   "    scope: { headers: [X-Tenant-Id] }\n"                                                 // 7
                   "    lease: 31s\n");                                                                      // 8
  const auto result = run({"--config", path.string(), "--check"});
  ASSERT_TRUE(result.exit_status.has_value()) << "--check did not finish";
  EXPECT_NE(*result.exit_status, 0) << output_of(result);
  EXPECT_NE(
      output_of(result).find(path.string() +
                             ":8:12: route \"pay\": lease (31s) must be at least the longest exchange plus a 1s margin "
                             "(38s = 2 × store.postgres.query_timeout 2s + store.postgres.acquire_timeout 1s + "
                             "2 × upstream.connect_timeout 1s + upstream.timeout 30s + margin 1s)"),
      std::string::npos)
      << output_of(result);
}

// --check: an unreadable file is an error too.
// --check --against OLD: the new file checked as a reload over OLD, with a warning at each route
// whose stored keys the change makes unreachable; a warning does not fail the check.
TEST_F(Cli, CheckAgainstAnOlderConfigWarnsAtEachRouteWhoseKeysItForgets) {
  const std::string old_text = valid_config("host=127.0.0.1 port=1 user=nobody dbname=none");
  std::string new_text = old_text;
  const auto replace = [&](std::string_view from, std::string_view to) {
    const auto at = new_text.find(from);
    ASSERT_NE(at, std::string::npos) << from << "\n" << new_text;
    new_text.replace(at, from.size(), to);
  };
  replace("path: /orders }\n    scope: { headers: [X-Tenant-Id] }",
          "path: /orders }\n    scope: { headers: [X-Tenant-Id, X-User-Id] }");
  replace("- name: refunds\n", "- name: refund-order\n");
  const auto old_path = write_config("old.yaml", old_text);
  const auto new_path = write_config("new.yaml", new_text);
  // Where the two routes start in new.yaml (the position of their first key).
  const auto line_of = [&](std::string_view needle) {
    const auto at = new_text.find(needle);
    return std::to_string(1 + std::count(new_text.begin(), new_text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  };
  const std::string suffix =
      ": keys stored before are not found any more, so retries that straddle the change execute again";

  const auto result = run({"--config", new_path.string(), "--check", "--against", old_path.string()});
  ASSERT_TRUE(result.exit_status.has_value()) << "--check did not finish";
  EXPECT_EQ(*result.exit_status, 0) << output_of(result);
  EXPECT_NE(result.stderr_text.find(new_path.string() + ":" + line_of("- name: orders") +
                                    ":5: warning: route \"orders\" scope.headers changed from [X-Tenant-Id] to "
                                    "[X-Tenant-Id, X-User-Id]" +
                                    suffix),
            std::string::npos)
      << output_of(result);
  EXPECT_NE(result.stderr_text.find(new_path.string() + ":" + line_of("- name: refund-order") +
                                    ":5: warning: route \"refund-order\" renamed from refunds" + suffix),
            std::string::npos)
      << output_of(result);

  // Without --against there is nothing to compare; --against alone is refused.
  const auto plain = run({"--config", new_path.string(), "--check"});
  EXPECT_EQ(plain.stderr_text.find("straddle"), std::string::npos) << output_of(plain);
  const auto alone = run({"--config", new_path.string(), "--against", old_path.string()});
  ASSERT_TRUE(alone.exit_status.has_value());
  EXPECT_EQ(*alone.exit_status, 2) << output_of(alone);
}

TEST_F(Cli, CheckFailsOnAMissingFile) {
  const auto result = run({"--config", (dir_.path() / "missing.yaml").string(), "--check"});
  ASSERT_TRUE(result.exit_status.has_value());
  EXPECT_NE(*result.exit_status, 0);
  EXPECT_NE(output_of(result).find("missing.yaml"), std::string::npos) << output_of(result);
}

// Unknown arguments are refused.
TEST_F(Cli, UnknownArgumentIsRefused) {
  const auto result = run({"--no-such-flag"});
  ASSERT_TRUE(result.exit_status.has_value());
  EXPECT_NE(*result.exit_status, 0);
}

// --migrate is idempotent: applying the schema twice succeeds both times.
TEST_F(Cli, MigrateTwiceSucceeds) {
  const auto path = write_config("migrate.yaml", valid_config(pg_dsn()));
  for (int round = 0; round < 2; ++round) {
    const auto result = run({"--config", path.string(), "--migrate"});
    ASSERT_TRUE(result.exit_status.has_value()) << "--migrate did not finish";
    EXPECT_EQ(*result.exit_status, 0) << output_of(result);
  }
}

// --migrate against an unreachable database fails with a non-zero status.
TEST_F(Cli, MigrateFailsWhenTheDatabaseIsUnreachable) {
  const auto path = write_config("nodb.yaml", valid_config("host=127.0.0.1 port=" + std::to_string(free_port()) +
                                                           " user=postgres dbname=postgres connect_timeout=2"));
  const auto result = run({"--config", path.string(), "--migrate"});
  ASSERT_TRUE(result.exit_status.has_value()) << "--migrate hung on an unreachable database";
  EXPECT_NE(*result.exit_status, 0) << output_of(result);
}

// SIGTERM: the proxy drains and exits 0.
using Shutdown = ProxyTest;

TEST_F(Shutdown, SigtermExitsZero) {
  const auto response = send(order(unique_key("shutdown")));
  ASSERT_EQ(response.status, 200) << describe(response);
  const auto status = proxy().stop_proxy(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << "idemproxy did not exit cleanly on SIGTERM";
}

// SIGTERM while a request is in flight: the request still gets its answer before the exit.
TEST_F(Shutdown, SigtermLetsAnInFlightRequestFinish) {
  const std::string key = unique_key("drain");
  auto in_flight = std::async(std::launch::async, [&] { return send(order(key).with("X-Test-Delay-Ms", "800")); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (upstream_count(key) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(upstream_count(key), 1u);
  ASSERT_TRUE(proxy().proxy_process()->signal(SIGTERM));
  const auto response = in_flight.get();
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, 200) << describe(response);
  const auto status = proxy().proxy_process()->wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0);
}

}  // namespace
}  // namespace idem::test::e2e
