// The request's host is part of a record's scope (README "Keys, scopes and fingerprints"): an
// upstream that serves tenants by host name never replays one host's response to another, while
// one host spelled differently (case, port, a trailing dot) is still one key space. A route that
// says `scope: { host: false }` shares one key space across hosts, and records made before the
// host joined the scope (here: under that setting, then reloaded) keep matching during their ttl.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"
#include "support/eventually.hpp"

namespace idem::test::ops {
namespace {

HttpRequest order_at(std::string_view host, std::string_view key) {
  return e2e::order(key).with("Host", std::string(host));
}

class OpsHostScope : public ProxyTest {};

TEST_F(OpsHostScope, TwoHostsWithTheSameKeyAndBodyGetTheirOwnExecutions) {
  const std::string key = unique_key("two-hosts");
  const HttpResponse at_a = send(order_at("tenant-a.api.test", key));
  ASSERT_EQ(at_a.status, 200) << describe(at_a);
  const HttpResponse at_b = send(order_at("tenant-b.api.test", key));
  ASSERT_EQ(at_b.status, 200) << describe(at_b);
  EXPECT_FALSE(e2e::is_replay(at_b)) << "tenant B got tenant A's stored response:\n" << describe(at_b);
  EXPECT_EQ(upstream_count(key), 2u);
  EXPECT_NE(e2e::execution_of(at_a), e2e::execution_of(at_b));

  // Each host's retries replay its own response, however the host is spelled.
  for (const std::string_view spelling : {"tenant-a.api.test", "TENANT-A.api.test", "tenant-a.api.test:8443", "tenant-a.api.test."}) {
    const HttpResponse retry = send(order_at(spelling, key));
    EXPECT_TRUE(e2e::is_replay(retry)) << spelling << "\n" << describe(retry);
    EXPECT_EQ(retry.body, at_a.body) << spelling;
  }
  const HttpResponse retry_b = send(order_at("tenant-b.api.test", key));
  EXPECT_TRUE(e2e::is_replay(retry_b)) << describe(retry_b);
  EXPECT_EQ(retry_b.body, at_b.body);
  EXPECT_EQ(upstream_count(key), 2u);
}

// The operator names a record of a host-scoped route by the original request's host.
TEST_F(OpsHostScope, TheAdminApiNamesARecordByItsHost) {
  const std::uint16_t admin = admin_port_of(*proxy().proxy_process());
  const std::string key = unique_key("admin-host");
  ASSERT_EQ(send(order_at("tenant-a.api.test", key)).status, 200);
  const std::vector<std::pair<std::string, std::string>> tenant{{"X-Tenant-Id", "t1"}};
  const HttpResponse found = admin_get(admin, "/admin/keys/orders/" + key + "?host=Tenant-A.api.test:443", std::nullopt, tenant);
  EXPECT_EQ(found.status, 200) << describe(found);
  e2e::expect_problem(admin_get(admin, "/admin/keys/orders/" + key + "?host=tenant-b.api.test", std::nullopt, tenant), 404,
                      "not-found");
  const HttpResponse no_host = admin_get(admin, "/admin/keys/orders/" + key, std::nullopt, tenant);
  EXPECT_EQ(no_host.status, 404) << describe(no_host);
  EXPECT_NE(no_host.body.find("?host="), std::string::npos) << describe(no_host);
}

// Starts with `scope: { host: false }` on the orders route (as a record made before this version
// had it), then reloads to the default (the host in the scope).
class OpsHostScopeUpgrade : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = host_free_template();
    return options;
  }
  static std::string host_free_template() {
    std::string text(default_config_template());
    const std::string scoped = "scope: { headers: [X-Tenant-Id] }";
    text.replace(text.find(scoped), scoped.size(), "scope: { headers: [X-Tenant-Id], host: false }");
    return text;
  }
};

TEST_F(OpsHostScopeUpgrade, HostFreeRoutesShareKeysAndTheirRecordsStillMatchAfterTheHostJoinsTheScope) {
  Process& process = *proxy().proxy_process();
  const std::string before = unique_key("before-upgrade");
  const HttpResponse first = send(order_at("tenant-a.api.test", before));
  ASSERT_EQ(first.status, 200) << describe(first);
  // host: false: one key space for every host (the opt-out).
  const HttpResponse other_host = send(order_at("tenant-b.api.test", before));
  EXPECT_TRUE(e2e::is_replay(other_host)) << describe(other_host);
  EXPECT_EQ(upstream_count(before), 1u);

  std::string upgraded = proxy().config_text();
  const std::string opt_out = ", host: false";
  upgraded.erase(upgraded.find(opt_out), opt_out.size());
  replace_keeping_mtime(proxy().config_path(), upgraded);
  ASSERT_TRUE(process.signal(SIGHUP));
  ASSERT_TRUE(eventually([&] { return !events(process.stderr_text(), "reloaded").empty(); }, std::chrono::seconds(5)))
      << process.stderr_text();

  // The record made without the host still answers its retries (the claim's legacy probe): no
  // second execution across the upgrade.
  const HttpResponse retry = send(order_at("tenant-a.api.test", before));
  EXPECT_TRUE(e2e::is_replay(retry)) << describe(retry);
  EXPECT_EQ(retry.body, first.body);
  EXPECT_EQ(upstream_count(before), 1u);

  // Keys first used after the upgrade are per host.
  const std::string after = unique_key("after-upgrade");
  EXPECT_EQ(send(order_at("tenant-a.api.test", after)).status, 200);
  const HttpResponse after_b = send(order_at("tenant-b.api.test", after));
  EXPECT_EQ(after_b.status, 200) << describe(after_b);
  EXPECT_FALSE(e2e::is_replay(after_b)) << describe(after_b);
  EXPECT_EQ(upstream_count(after), 2u);
}

}  // namespace
}  // namespace idem::test::ops
