// deploy/monitoring against the real idemrelay: every idemrelay_* name its rules, promtool tests,
// dashboard and runbook use is a series of a real /metrics scrape after real traffic (the proxy's
// half: tests/ops/monitoring_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "ops/monitoring_names.hpp"
#include "relay/relay_env.hpp"
#include "relay/relay_fixture.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/process.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

class RelayMonitoring : public RelayFixture {};

TEST_F(RelayMonitoring, EveryRelayMetricTheMonitoringUsesIsExportedAfterTraffic) {
  const std::set<std::string> used =
      ops::monitoring_metric_names(std::filesystem::path(IDEM_SOURCE_DIR) / "deploy" / "monitoring", "idemrelay_");
  ASSERT_GE(used.size(), 6u) << "too few idemrelay_ names found: reading the wrong files?";
  settings_.admin_port = free_port();
  schema_->insert("order", "monitoring", 5);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  ASSERT_TRUE(wait_for_port(settings_.admin_port, 5s)) << relay.describe();
  const HttpResponse metrics = send(settings_.admin_port, HttpRequest::get("/metrics"));
  ASSERT_EQ(metrics.status, 200);
  const std::vector<std::string> missing = ops::names_not_exported(used, metrics.body);
  std::string list;
  for (const std::string& name : missing) list += "  " + name + "\n";
  EXPECT_TRUE(missing.empty()) << "used under deploy/monitoring but not exported by idemrelay:\n"
                               << list << "scrape:\n"
                               << metrics.body;
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
}

}  // namespace
}  // namespace idem::test::relay
