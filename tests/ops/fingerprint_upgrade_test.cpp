// Fingerprint v2 (README "Keys, scopes and fingerprints"): JSON numbers by their exact value. A
// record made before the upgrade carries a "v1:" fingerprint (numbers as doubles) and keeps
// matching its retries during its ttl: the proxy compares a request with a record in the record's
// scheme. Here the record is made through the proxy, then given the v1 fingerprint a proxy before
// the upgrade stored for the same request, in Postgres.
#include <gtest/gtest.h>

#include <string>

#include "e2e/e2e_support.hpp"
#include "fingerprint/fingerprint.hpp"
#include "support/blocking_pg.hpp"
#include "support/env.hpp"

namespace idem::test::ops {
namespace {

// The fingerprint a proxy before v2 stored for e2e::order(key, body) on the "orders" route
// (fingerprint headers: the default, Content-Type).
std::string v1_fingerprint_of_order(const std::string& body) {
  fingerprint::RequestFacts facts;
  facts.method = "POST";
  facts.path = "/orders";
  facts.headers = {{"Content-Type", std::string("application/json")}};
  facts.content_type = "application/json";
  facts.body = body;
  return fingerprint::request_fingerprint(facts, {}, fingerprint::FingerprintScheme::v1);
}

// No in-process replay cache: every retry reads the record in Postgres.
class OpsFingerprintUpgrade : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = std::string(default_config_template()) + "replay_cache: { max_bytes: 0 }\n";
    return options;
  }
};

TEST_F(OpsFingerprintUpgrade, AV1RecordFromBeforeTheUpgradeStillMatchesItsRetries) {
  const std::string key = unique_key("v1-record");
  const std::string body = R"({"account":12345678901234567890,"amount":100.0})";
  const HttpResponse first = send(e2e::order(key, body));
  ASSERT_EQ(first.status, 200) << describe(first);

  BlockingPg pg(pg_dsn());
  const auto stored = pg.scalar("SELECT fingerprint FROM idempotency_records WHERE key = $1", {key});
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->substr(0, 3), "v2:") << *stored;
  ASSERT_EQ(pg.execute("UPDATE idempotency_records SET fingerprint = $2 WHERE key = $1", {key, v1_fingerprint_of_order(body)}),
            1);

  // The same request (numbers spelled any way a double holds alike) replays the v1 record.
  for (const std::string& retry_body :
       {body, std::string(R"({"amount":1e2,"account":12345678901234567890})")}) {
    const HttpResponse retry = send(e2e::order(key, retry_body));
    EXPECT_TRUE(e2e::is_replay(retry)) << retry_body << "\n" << describe(retry);
    EXPECT_EQ(retry.body, first.body);
  }
  // A different request is still a 422.
  e2e::expect_problem(send(e2e::order(key, R"({"account":12345678901234567890,"amount":101})")), 422,
                      "fingerprint-mismatch");
  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_EQ(pg.scalar("SELECT fingerprint FROM idempotency_records WHERE key = $1", {key})->substr(0, 3), "v1:");
}

}  // namespace
}  // namespace idem::test::ops
