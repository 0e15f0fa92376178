// The admin bearer token (admin.token, from the config, an environment variable or a file):
// /metrics and /admin/* answer 401 without it or with anything but it; the probes stay open.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"

namespace idem::test::ops {
namespace {

using e2e::order;

constexpr std::string_view kTenant = "acme";

// Every protected endpoint refuses requests that do not carry exactly "Bearer <token>", accepts
// the one that does, and the probes never ask.
void expect_token_enforced(ProxyHarness& proxy, const std::string& token) {
  const std::uint16_t admin = admin_port_of(*proxy.proxy_process());
  const std::string key = unique_key("admin-auth");
  ASSERT_EQ(send(proxy.proxy_port(), order(key, e2e::kOrderBody, kTenant)).status, 200);
  const std::vector<std::pair<std::string, std::string>> scope{{"X-Tenant-Id", std::string(kTenant)}};
  const std::string record = "/admin/keys/orders/" + key + "?host=127.0.0.1";  // the routes scope keys by host

  for (const std::string& target : {std::string("/metrics"), record}) {
    const HttpResponse anonymous = admin_get(admin, target, std::nullopt, scope);
    EXPECT_EQ(anonymous.status, 401) << target << "\n" << describe(anonymous);
    EXPECT_EQ(anonymous.header("WWW-Authenticate"), "Bearer") << describe(anonymous);
    const std::vector<std::optional<std::string>> wrong{
        std::string("wrong-") + token, token.substr(0, token.size() - 1), token + "x", std::string()};
    for (const auto& candidate : wrong) {
      const HttpResponse refused = admin_get(admin, target, candidate, scope);
      EXPECT_EQ(refused.status, 401) << target << " with token '" << *candidate << "'\n" << describe(refused);
    }
    const HttpResponse basic = send(admin, HttpRequest::get(target).with("Authorization", "Basic " + token));
    EXPECT_EQ(basic.status, 401) << target << " with the token under the Basic scheme";
    const HttpResponse allowed = admin_get(admin, target, token, scope);
    EXPECT_EQ(allowed.status, 200) << target << "\n" << describe(allowed);
  }

  // A release without the token changes nothing (it is refused before any store call).
  const HttpResponse release = admin_post(admin, "/admin/keys/orders/" + key + "/release?host=127.0.0.1", std::nullopt, scope);
  EXPECT_EQ(release.status, 401) << describe(release);
  EXPECT_TRUE(events(proxy.proxy_process()->stderr_text(), "admin_release").empty())
      << "an unauthenticated release reached the handler";

  for (const std::string target : {"/healthz", "/readyz"}) {
    const HttpResponse probe = admin_get(admin, target);
    EXPECT_NE(probe.status, 401) << target << " must stay open for the kubelet\n" << describe(probe);
  }
  EXPECT_EQ(admin_get(admin, "/healthz").status, 200);
  EXPECT_EQ(proxy.proxy_process()->stderr_text().find(token), std::string::npos) << "the admin token was logged";
}

class OpsAdminTokenInConfig : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = config_with_admin(R"(admin: { listen: "127.0.0.1:0", token: ")" + token_ + "\" }");
    return options;
  }
  const std::string token_ = unique_key("admin-token");
};

TEST_F(OpsAdminTokenInConfig, ProtectsMetricsAndAdminButNotProbes) { expect_token_enforced(proxy(), token_); }

// The usual Kubernetes shape: token: "${VAR}" with VAR from a Secret.
class OpsAdminTokenFromEnvironment : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = config_with_admin(R"(admin: { listen: "127.0.0.1:0", token: "${OPS_ADMIN_TOKEN}" })");
    options.env.emplace_back("OPS_ADMIN_TOKEN", token_);
    return options;
  }
  const std::string token_ = unique_key("env-token");
};

TEST_F(OpsAdminTokenFromEnvironment, ProtectsMetricsAndAdminButNotProbes) { expect_token_enforced(proxy(), token_); }

// token_file: a mounted secret file, whose trailing newline is not part of the token.
class OpsAdminTokenFile : public ProxyTest {
 protected:
  OpsAdminTokenFile() { write_file(secret_dir_.path() / "admin-token", token_ + "\n"); }
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = config_with_admin(R"(admin: { listen: "127.0.0.1:0", token_file: ")" +
                                                (secret_dir_.path() / "admin-token").string() + "\" }");
    return options;
  }
  TempDir secret_dir_{"idem-ops-secret"};
  const std::string token_ = unique_key("file-token");
};

TEST_F(OpsAdminTokenFile, ProtectsMetricsAndAdminButNotProbes) { expect_token_enforced(proxy(), token_); }

}  // namespace
}  // namespace idem::test::ops
