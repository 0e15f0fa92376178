// /healthz and /readyz: liveness while the process runs; readiness only while Postgres is
// reachable and the proxy is not draining (false from the moment SIGTERM arrives).
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"
#include "support/eventually.hpp"
#include "support/ports.hpp"

namespace idem::test::ops {
namespace {

using e2e::order;

constexpr std::chrono::seconds kReadyWithin{5};

bool is_ready(std::uint16_t admin) {
  const HttpResponse response = admin_get(admin, "/readyz");
  return response.status == 200 && response.body == "ready\n";
}

class OpsProbes : public ProxyTest {};

TEST_F(OpsProbes, HealthyAndReadyWhilePostgresIsReachable) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  const HttpResponse health = admin_get(admin, "/healthz");
  EXPECT_EQ(health.status, 200) << describe(health);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_TRUE(eventually([&] { return is_ready(admin); }, kReadyWithin)) << describe(admin_get(admin, "/readyz"));
}

// SIGTERM with a slow request in flight: readiness drops at once, long before that request ends;
// the request still completes with the upstream's answer and the process exits 0.
TEST_F(OpsProbes, SigtermFailsReadinessAtOnceAndTheInFlightRequestCompletes) {
  constexpr int kUpstreamDelayMs = 2000;
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  ASSERT_TRUE(eventually([&] { return is_ready(admin); }, kReadyWithin));

  const std::string key = unique_key("drain");
  std::atomic<bool> finished{false};
  auto slow = std::async(std::launch::async, [&] {
    HttpResponse response = send(order(key).with("X-Test-Delay-Ms", std::to_string(kUpstreamDelayMs)));
    finished.store(true);
    return response;
  });
  // In flight: the claim is held while the upstream call runs.
  ASSERT_TRUE(eventually(
      [&] {
        return metric_value(admin_get(admin, "/metrics").body, "idemproxy_in_flight_records") == std::optional(1.0);
      },
      std::chrono::seconds(5)));

  const auto signalled = std::chrono::steady_clock::now();
  ASSERT_TRUE(proxy().proxy_process()->signal(SIGTERM));
  HttpResponse readiness;
  EXPECT_TRUE(eventually(
      [&] {
        readiness = admin_get(admin, "/readyz");
        return readiness.status == 503;
      },
      std::chrono::seconds(1)))
      << describe(readiness);
  const auto flipped_after = std::chrono::steady_clock::now() - signalled;
  EXPECT_EQ(readiness.body, "draining\n") << describe(readiness);
  EXPECT_FALSE(finished.load()) << "readiness flipped only after the in-flight request ended";
  EXPECT_LT(flipped_after, std::chrono::milliseconds(kUpstreamDelayMs / 2));
  EXPECT_EQ(admin_get(admin, "/healthz").status, 200) << "liveness must hold while draining";
  EXPECT_EQ(metric_value(admin_get(admin, "/metrics").body, "idemproxy_draining"), 1.0);

  const HttpResponse response = slow.get();
  EXPECT_EQ(response.status, 200) << describe(response);
  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_EQ(proxy().proxy_process()->wait_exit(std::chrono::seconds(10)), 0) << proxy().diagnostics();
}

// Postgres unreachable (the DSN points at a closed port): alive, not ready.
TEST(OpsProbesWithoutPostgres, NotReadyButAliveWhenPostgresIsUnreachable) {
  const std::string dsn = "host=127.0.0.1 port=" + std::to_string(free_port()) + " user=postgres dbname=postgres";
  StandaloneProxy proxy(render_template(default_config_template(), {{"PROXY_PORT", std::to_string(free_port())},
                                                                     {"UPSTREAM_PORT", std::to_string(free_port())},
                                                                     {"UPSTREAM_TIMEOUT", "5s"},
                                                                     {"PG_DSN", yaml_quoted(dsn)}}));
  // Give the store time for several connection attempts: the answer must not change.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  for (int i = 0; i < 3; ++i) {
    const HttpResponse readiness = admin_get(proxy.admin_port(), "/readyz");
    EXPECT_EQ(readiness.status, 503) << describe(readiness) << proxy.diagnostics();
    EXPECT_EQ(readiness.body, "store unreachable\n") << describe(readiness);
    const HttpResponse health = admin_get(proxy.admin_port(), "/healthz");
    EXPECT_EQ(health.status, 200) << describe(health);
    EXPECT_EQ(health.body, "ok\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(proxy.process().running()) << proxy.diagnostics();
  EXPECT_GT(metric_value(admin_get(proxy.admin_port(), "/metrics").body, "idemproxy_pg_connects_failed_total")
                .value_or(0),
            0.0);
}

}  // namespace
}  // namespace idem::test::ops
