// Encryption at rest, end to end: what the proxy writes to Postgres must not contain the response
// in clear, a retry must still replay it, and a record whose bytes were altered in the database
// must be refused as record-corrupt (never replayed, never re-executed).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "e2e/e2e_support.hpp"
#include "security/raw_records.hpp"
#include "support/env.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::security {
namespace {

constexpr std::string_view kKeyVariable = "IDEM_TEST_KEY_1";
// Fixed test key (32 bytes, 64 hex digits): nothing here is secret.
constexpr std::string_view kKeyHex = "5f3a9c0e7b21d4486a1fe03c92b75d6e0c4a18f27e93b65d10a8c4e2f7365b91";
constexpr std::string_view kFixtureStoreLine =
    "store: { postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: \"${IDEMPROXY_TEST_PG_PREPARED:-true}\", "
    "query_timeout: 1s, acquire_timeout: 500ms } }";

class SecurityEncryption : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    std::string text(default_config_template());
    const auto at = text.find(kFixtureStoreLine);
    if (at == std::string::npos) throw std::runtime_error("fixture config has no store line");
    text.replace(at, kFixtureStoreLine.size(),
                 "store:\n"
                 "  postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: \"${IDEMPROXY_TEST_PG_PREPARED:-true}\", "
                 "query_timeout: 1s, acquire_timeout: 500ms }\n"
                 "  encryption:\n"
                 "    current_key: k1\n"
                 "    keys: [ { id: k1, env: " + std::string(kKeyVariable) + " } ]");
    // Every replay must come from the store, through decryption.
    text += "replay_cache: { max_bytes: 0 }\n";
    ProxyOptions options;
    options.config_template = std::move(text);
    options.env.emplace_back(std::string(kKeyVariable), std::string(kKeyHex));
    return options;
  }
};

HttpRequest echoed_order(const std::string& key, const std::string& body) {
  return e2e::order(key, body).with(std::string(upstream::kEchoHeader), "1");
}

TEST_F(SecurityEncryption, StoredBodyIsCiphertextReplaysAndCorruptionIsRefused) {
  const std::string key = unique_key("enc");
  const std::string marker = "MARKER-" + unique_key("plaintext-must-not-reach-postgres");
  const std::string body = R"({"note":")" + marker + R"(","item":"book"})";

  const auto first = send(echoed_order(key, body));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  ASSERT_NE(first.body.find(marker), std::string::npos) << "upstream did not echo the body: " << describe(first);

  const auto stored = raw_stored_body(key);
  ASSERT_TRUE(stored.has_value()) << "no completed record with a body for the key";
  EXPECT_EQ(stored->find(marker), std::string::npos) << "the response body is stored in clear";
  EXPECT_GT(stored->size(), 20u);

  const auto replay = send(echoed_order(key, body));
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_EQ(replay.status, 200) << describe(replay);
  EXPECT_TRUE(e2e::is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);

  ASSERT_EQ(flip_stored_body_byte(key), 1);
  const auto corrupt = send(echoed_order(key, body));
  e2e::expect_problem(corrupt, 500, "record-corrupt");
  EXPECT_EQ(corrupt.body.find(marker), std::string::npos) << describe(corrupt);
  EXPECT_EQ(upstream_count(key), 1u);

  // The proxy keeps serving other keys.
  const std::string other = unique_key("enc-other");
  const auto fresh = send(echoed_order(other, body));
  ASSERT_TRUE(fresh.ok()) << fresh.error;
  EXPECT_EQ(fresh.status, 200) << describe(fresh);
}

}  // namespace
}  // namespace idem::test::security
