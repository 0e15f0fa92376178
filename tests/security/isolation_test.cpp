// What one caller can learn about another through the proxy: nothing. Tenants (the route's scope
// headers) that send the same key never meet in the store, not even while one of them is still
// in flight, and credentials reach the upstream but never a stored record or a log line.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "security/raw_records.hpp"
#include "support/eventually.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::security {
namespace {

using namespace std::chrono_literals;

class TenantIsolation : public ProxyTest {};

// The attacker knows (or guesses) the victim's key, and sends it from its own tenant, while the
// victim's request is still executing and after it completed. Each time it gets a fresh execution
// of its own: no 409 that would confirm the key is in use, no 422 that would confirm another body
// was sent with it, no replay of the victim's response.
TEST_F(TenantIsolation, AGuessedKeyFromAnotherTenantRevealsNothingOfTheVictims) {
  const std::string key = unique_key("victim");
  const std::string victim_body = R"({"item":"diamond ring","card":"4242"})";
  HttpResponse victim;
  std::thread victim_thread([&] {
    victim = send(e2e::order(key, victim_body, "tenant-victim").with(std::string(upstream::kDelayHeader), "1500"));
  });
  // The victim's request is executing upstream, that is, in flight.
  const bool executing = eventually([&] { return upstream_count(key) == 1; }, 3s, 10ms);
  if (!executing) victim_thread.join();
  ASSERT_TRUE(executing) << "the victim's request never reached the upstream";

  const auto during = send(e2e::order(key, R"({"item":"probe"})", "tenant-attacker"));
  victim_thread.join();
  ASSERT_TRUE(during.ok() && victim.ok()) << during.error << victim.error;
  EXPECT_EQ(during.status, 200) << describe(during);
  EXPECT_FALSE(during.has_header("Idempotent-Replay")) << describe(during);
  EXPECT_EQ(victim.status, 200) << describe(victim);
  EXPECT_FALSE(victim.has_header("Idempotent-Replay")) << "the attacker's claim must not block the victim";

  // After completion: the victim's exact body under the attacker's tenant, as a second probe key
  // would be, is the attacker's own record, never the victim's response.
  const std::string probe_key = unique_key("victim-copy");
  const auto copied = send(e2e::order(probe_key, victim_body, "tenant-attacker"));
  ASSERT_TRUE(copied.ok()) << copied.error;
  EXPECT_EQ(copied.status, 200) << describe(copied);
  EXPECT_FALSE(copied.has_header("Idempotent-Replay")) << describe(copied);

  const auto attacker_retry = send(e2e::order(key, R"({"item":"probe"})", "tenant-attacker"));
  EXPECT_TRUE(e2e::is_replay(attacker_retry)) << describe(attacker_retry);
  EXPECT_EQ(attacker_retry.body, during.body);
  EXPECT_NE(attacker_retry.body, victim.body);

  const auto victim_retry = send(e2e::order(key, victim_body, "tenant-victim"));
  EXPECT_TRUE(e2e::is_replay(victim_retry)) << describe(victim_retry);
  EXPECT_EQ(victim_retry.body, victim.body);
  EXPECT_EQ(e2e::execution_of(victim_retry), e2e::execution_of(victim));
  EXPECT_EQ(upstream_count(key), 2u);
  EXPECT_EQ(upstream_count(probe_key), 1u);
}

class NeverStored : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = std::string(default_config_template()) + "log: { level: debug, access: true }\n";
    return options;
  }
};

// Credentials pass through to the upstream (it needs them), and Set-Cookie reaches the client that
// executed; none of them is in the stored record, a replay or any line the proxy logged.
TEST_F(NeverStored, CredentialsReachTheUpstreamButNoRecordReplayOrLogLine) {
  const std::string authorization = unique_key("authorization-secret");
  const std::string cookie = unique_key("cookie-secret");
  const std::string proxy_authorization = unique_key("proxy-authorization-secret");
  const std::string set_cookie = unique_key("set-cookie-secret");
  auto with_credentials = [&](HttpRequest request) {
    return request.with("Authorization", "Bearer " + authorization)
        .with("Cookie", "session=" + cookie)
        .with("Proxy-Authorization", "Basic " + proxy_authorization);
  };

  const auto echoed = send(with_credentials(HttpRequest::get("/plain/whoami")).with(std::string(upstream::kEchoHeadersHeader), "1"));
  ASSERT_EQ(echoed.status, 200) << describe(echoed);
  EXPECT_NE(echoed.body.find(authorization), std::string::npos) << "Authorization must reach the upstream: " << echoed.body;
  EXPECT_NE(echoed.body.find(cookie), std::string::npos) << "Cookie must reach the upstream: " << echoed.body;

  const std::string key = unique_key("credentials");
  const auto keyed = [&] {
    return with_credentials(e2e::order(key)).with(std::string(upstream::kAddHeaderHeader), "Set-Cookie: sid=" + set_cookie);
  };
  const auto first = send(keyed());
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(first.header("Set-Cookie"), "sid=" + set_cookie);
  const auto replay = send(keyed());
  ASSERT_TRUE(e2e::is_replay(replay)) << describe(replay);
  EXPECT_FALSE(replay.has_header("Set-Cookie")) << describe(replay);
  EXPECT_EQ(upstream_count(key), 1u);

  const std::string stored = raw_record_bytes(key);
  ASSERT_FALSE(stored.empty()) << "no record for the key";
  const std::string logged = proxy().proxy_process()->stderr_text();
  ASSERT_NE(logged.find("\"decision\":\"replay\""), std::string::npos) << "the access log is not on: " << logged;
  for (const std::string& secret : {authorization, cookie, proxy_authorization, set_cookie}) {
    EXPECT_EQ(stored.find(secret), std::string::npos) << secret << " is in the stored record";
    EXPECT_EQ(replay.body.find(secret), std::string::npos) << secret << " is in the replay";
    EXPECT_EQ(logged.find(secret), std::string::npos) << secret << " is in the proxy's log";
  }
}

}  // namespace
}  // namespace idem::test::security
