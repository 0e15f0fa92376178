// deploy/monitoring against the real idemproxy: every idemproxy_* name its rules, promtool tests,
// dashboard and runbook use is a series of a real /metrics scrape after end-to-end traffic (the
// relay's half is tests/relay/relay_process_test.cpp). Store and Redis are real; Redis is
// configured so that its families are exported.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "ops/monitoring_names.hpp"
#include "ops/ops_support.hpp"
#include "support/random_hex.hpp"
#include "support/redis_client.hpp"

namespace idem::test::ops {
namespace {

using e2e::order;

const std::filesystem::path kMonitoringDir = std::filesystem::path(IDEM_SOURCE_DIR) / "deploy" / "monitoring";

class OpsMonitoring : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    std::string text(default_config_template());
    // The default store line ends the postgres mapping and the store mapping: Redis joins the store.
    const std::string store_end = "acquire_timeout: 500ms } }";
    const auto at = text.find(store_end);
    if (at == std::string::npos) throw std::runtime_error("the default config's store line changed");
    text.replace(at, store_end.size(),
                 "acquire_timeout: 500ms }, redis: { address: \"127.0.0.1:${REDIS_PORT}\", key_prefix: "
                 "\"${REDIS_PREFIX}\" } }");
    ProxyOptions options;
    options.config_template = text;
    options.variables["REDIS_PORT"] = std::to_string(suite_redis_port());
    options.variables["REDIS_PREFIX"] = "monitoring-" + random_hex(8) + ":";
    return options;
  }
};

TEST_F(OpsMonitoring, EveryProxyMetricTheMonitoringUsesIsExportedAfterTraffic) {
  const std::set<std::string> used = monitoring_metric_names(kMonitoringDir, "idemproxy_");
  // The rules and the dashboard cover the proxy's traffic, store, pool and Redis: a scan that
  // found only a few names is reading the wrong files.
  ASSERT_GE(used.size(), 15u) << "found only " << used.size() << " idemproxy_ names under " << kMonitoringDir;

  // New, replay, 422, 400 and a request no route matches: every decision family, both histograms
  // of the exchange and the store's.
  const std::string key = unique_key("monitoring");
  ASSERT_EQ(send(order(key)).status, 200);
  ASSERT_TRUE(e2e::is_replay(send(order(key))));
  ASSERT_EQ(send(order(key, R"({"item":"pen","quantity":2})")).status, 422);
  ASSERT_EQ(send(HttpRequest::post("/orders", std::string(e2e::kOrderBody)).with("X-Tenant-Id", "t1")).status, 400);
  ASSERT_EQ(send(HttpRequest::get("/status")).status, 200);

  const HttpResponse scrape = admin_get(admin_port_of(*proxy().proxy_process()), "/metrics");
  ASSERT_EQ(scrape.status, 200) << describe(scrape);
  const std::vector<std::string> missing = names_not_exported(used, scrape.body);
  std::string list;
  for (const std::string& name : missing) list += "  " + name + "\n";
  EXPECT_TRUE(missing.empty()) << "used under deploy/monitoring but not exported by idemproxy:\n"
                               << list << "scrape:\n"
                               << scrape.body;
}

}  // namespace
}  // namespace idem::test::ops
