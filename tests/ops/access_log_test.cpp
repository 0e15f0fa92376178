// The access log: one JSON line per request with route, decision, status, upstream and store
// time and a hash of the key; never the raw key, the Authorization header, the query or a body,
// even at level debug.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"
#include "support/eventually.hpp"

namespace idem::test::ops {
namespace {

using e2e::order;

class OpsAccessLog : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = std::string(default_config_template()) + "log: { level: debug, access: true }\n";
    return options;
  }
};

TEST_F(OpsAccessLog, OneLinePerRequestAndNoSecrets) {
  const std::string key = unique_key("log-key-secret");
  const std::string authorization = "Bearer " + unique_key("authorization-secret");
  const std::string body_secret = unique_key("body-secret");
  const std::string query_secret = unique_key("query-secret");
  const std::string body = R"({"item":"book","card":")" + body_secret + "\"}";
  auto keyed = [&] {
    return HttpRequest::post("/orders?signature=" + query_secret, body)
        .with("Idempotency-Key", key)
        .with("X-Tenant-Id", "t1")
        .with("Authorization", authorization)
        .with("X-Test-Echo", "1");  // the response body carries the request body too
  };

  const HttpResponse first = send(keyed());
  ASSERT_EQ(first.status, 200) << describe(first);
  const HttpResponse replay = send(keyed());
  ASSERT_EQ(replay.status, 200) << describe(replay);
  ASSERT_TRUE(e2e::is_replay(replay));
  ASSERT_EQ(send(HttpRequest::post("/orders", body).with("Authorization", authorization)).status, 400);
  ASSERT_EQ(send(HttpRequest::get("/plain/status").with("Authorization", authorization)).status, 200);

  Process& process = *proxy().proxy_process();
  std::vector<boost::json::object> lines;
  ASSERT_TRUE(eventually(
      [&] {
        lines = events(process.stderr_text(), "request");
        return lines.size() >= 4;
      },
      std::chrono::seconds(5)))
      << process.stderr_text();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  lines = events(process.stderr_text(), "request");
  ASSERT_EQ(lines.size(), 4u) << process.stderr_text();

  for (const auto& line : lines) {
    for (const char* field : {"time", "route", "decision", "key_sha256", "method", "path"}) {
      EXPECT_TRUE(string_field(line, field).has_value()) << field << " in " << boost::json::serialize(line);
    }
    for (const char* field : {"status", "upstream_us", "store_us"}) {
      EXPECT_TRUE(int_field(line, field).has_value()) << field << " in " << boost::json::serialize(line);
    }
  }
  const std::string hash = key_sha256_prefix(key);
  EXPECT_EQ(string_field(lines[0], "route"), "orders");
  EXPECT_EQ(string_field(lines[0], "decision"), "new");
  EXPECT_EQ(int_field(lines[0], "status"), 200);
  EXPECT_EQ(string_field(lines[0], "key_sha256"), hash);
  EXPECT_EQ(string_field(lines[0], "path"), "/orders");
  EXPECT_GT(int_field(lines[0], "upstream_us").value_or(0), 0);
  EXPECT_GT(int_field(lines[0], "store_us").value_or(0), 0);

  EXPECT_EQ(string_field(lines[1], "decision"), "replay");
  EXPECT_EQ(int_field(lines[1], "status"), 200);
  EXPECT_EQ(string_field(lines[1], "key_sha256"), hash);
  EXPECT_EQ(int_field(lines[1], "upstream_us"), 0);

  EXPECT_EQ(string_field(lines[2], "route"), "orders");
  EXPECT_EQ(string_field(lines[2], "decision"), "missing_key_400");
  EXPECT_EQ(int_field(lines[2], "status"), 400);

  EXPECT_EQ(string_field(lines[3], "route"), "off-route");
  EXPECT_EQ(string_field(lines[3], "decision"), "passthrough");
  EXPECT_EQ(int_field(lines[3], "status"), 200);

  // Nothing the proxy wrote, on either stream, holds a secret.
  const std::string everything = process.stderr_text() + process.stdout_text();
  for (const std::string& secret : {key, authorization, authorization.substr(7), body_secret, query_secret}) {
    EXPECT_EQ(everything.find(secret), std::string::npos) << "\"" << secret << "\" is in the proxy's output";
  }
}

}  // namespace
}  // namespace idem::test::ops
