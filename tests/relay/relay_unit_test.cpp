// idemrelay's pure parts: config loading and its messages, destination templates, the row backoff
// and Standard Webhooks signatures. No sockets.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "config/relay_config_loader.hpp"
#include "pg/session_options.hpp"
#include "relay/parked_rows.hpp"
#include "relay/backoff.hpp"
#include "relay/http_sink.hpp"
#include "relay/message_template.hpp"
#include "relay/redis_stream_sink.hpp"
#include "crypto/base64.hpp"
#include "relay/webhook_signature.hpp"

namespace idem::relay {
namespace {

using namespace std::chrono_literals;
using pg::with_session_settings;

config::EnvLookup env(std::map<std::string, std::string> values) {
  return [values = std::move(values)](std::string_view name) -> std::optional<std::string> {
    const auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

std::string messages(const config::RelayLoadResult& result) {
  std::string out;
  for (const auto& issue : result.issues) out += issue.to_string() + "\n";
  return out;
}

TEST(RelayConfig, TheExampleFileLoadsWithItsDocumentedDefaults) {
  const auto result = config::load_relay_config_file(std::string(IDEM_SOURCE_DIR) + "/config/idemrelay.example.yaml",
                                                     env({{"IDEMPROXY_PG_DSN", "host=db"}}));
  ASSERT_TRUE(result.config) << messages(result);
  const config::RelayConfig& c = *result.config;
  const config::RelayConfig defaults;
  EXPECT_EQ(c.postgres.dsn, "host=db");
  EXPECT_EQ(c.relay.batch_size, defaults.relay.batch_size);
  EXPECT_EQ(c.relay.lease, defaults.relay.lease);
  EXPECT_EQ(c.relay.backoff_max, 5min);
  EXPECT_EQ(c.retention.max_age, defaults.retention.max_age);
  EXPECT_EQ(c.sink.kind, config::SinkKind::redis_streams);
  EXPECT_EQ(c.sink.redis.port, 6379);
  EXPECT_EQ(c.sink.redis.dedup_window, 24h);
  EXPECT_EQ(c.sink.redis.stream.text, "outbox.{aggregate_type}");
  EXPECT_FALSE(c.admin.enabled);
}

TEST(RelayConfig, EveryProblemIsReportedWithItsPosition) {
  const auto result = config::load_relay_config_text(
      "postgres: { dsn: x }\n"
      "relay:\n"
      "  batch_sise: 10\n"
      "  lease: 1s\n"
      "sink:\n"
      "  type: redis_streams\n"
      "  redis_streams: { stream: \"out.{aggregate}\" }\n",
      "relay.yaml", env({}));
  EXPECT_FALSE(result.config);
  const std::string text = messages(result);
  EXPECT_NE(text.find("relay.yaml:3:3: unknown key \"batch_sise\" in relay"), std::string::npos) << text;
  EXPECT_NE(text.find("relay.yaml:4:10: relay.lease (1s) must exceed"), std::string::npos) << text;
  EXPECT_NE(text.find("relay.yaml:7:28: bad template \"out.{aggregate}\""), std::string::npos) << text;
}

TEST(RelayConfig, HttpSinkNeedsAWellFormedSecret) {
  const std::string base =
      "postgres: { dsn: x }\nsink:\n  type: http\n  http: { url: \"http://127.0.0.1:9000/in/{event_type}\"";
  const auto missing = config::load_relay_config_text(base + " }\n", "a.yaml", env({}));
  EXPECT_NE(messages(missing).find("sink.http.secret, secret_file, secrets or secret_files is required"),
            std::string::npos)
      << messages(missing);
  const auto bad = config::load_relay_config_text(base + ", secret: \"hunter2\" }\n", "b.yaml", env({}));
  EXPECT_NE(messages(bad).find("must be \"whsec_\""), std::string::npos) << messages(bad);
  EXPECT_EQ(messages(bad).find("hunter2"), std::string::npos) << "the secret is never echoed";
  const auto good = config::load_relay_config_text(base + ", secret: \"${S}\" }\n", "c.yaml",
                                                   env({{"S", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}));
  ASSERT_TRUE(good.config) << messages(good);
  EXPECT_EQ(good.config->sink.http.host, "127.0.0.1");
  EXPECT_EQ(good.config->sink.http.port, 9000);
  EXPECT_EQ(good.config->sink.http.target.text, "/in/{event_type}");
}

// A rotation lists the secrets, new first: from the environment (secrets) or from files
// (secret_files, which the relay then watches). One form only; 1 to 4 entries; each checked.
TEST(RelayConfig, WebhookSecretsForARotationComeFromTheEnvironmentOrFiles) {
  const std::string base = "postgres: { dsn: x }\nsink:\n  type: http\n  http: { url: \"http://127.0.0.1:9000/in\"";
  const std::string new_secret = "whsec_bmV3LXNlY3JldC1mb3ItdGVzdHMtMDI=";
  const std::string old_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const auto listed = config::load_relay_config_text(base + ", secrets: [\"${NEW}\", \"${OLD}\"] }\n", "a.yaml",
                                                     env({{"NEW", new_secret}, {"OLD", old_secret}}));
  ASSERT_TRUE(listed.config) << messages(listed);
  EXPECT_EQ(listed.config->sink.http.secrets, (std::vector<std::string>{new_secret, old_secret}));
  EXPECT_TRUE(listed.config->sink.http.secret_files.empty());

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("relay-secrets-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "new") << new_secret << "\n";
  std::ofstream(dir / "old") << old_secret << "\n";
  const auto files = config::load_relay_config_text(
      base + ", secret_files: [" + (dir / "new").string() + ", " + (dir / "old").string() + "] }\n", "b.yaml", env({}));
  ASSERT_TRUE(files.config) << messages(files);
  EXPECT_EQ(files.config->sink.http.secrets, (std::vector<std::string>{new_secret, old_secret}));
  EXPECT_EQ(files.config->sink.http.secret_files,
            (std::vector<std::string>{(dir / "new").string(), (dir / "old").string()}));
  std::filesystem::remove_all(dir);

  const auto both = config::load_relay_config_text(
      base + ", secret: \"" + old_secret + "\", secrets: [\"" + new_secret + "\"] }\n", "c.yaml", env({}));
  EXPECT_NE(messages(both).find("not secret and secrets"), std::string::npos) << messages(both);
  const auto none = config::load_relay_config_text(base + ", secrets: [] }\n", "d.yaml", env({}));
  EXPECT_NE(messages(none).find("sink.http.secrets takes 1 to 4 entries"), std::string::npos) << messages(none);
  const auto bad = config::load_relay_config_text(base + ", secrets: [\"" + new_secret + "\", \"whsec_hunter2\"] }\n",
                                                  "e.yaml", env({}));
  EXPECT_NE(messages(bad).find("e.yaml:4:"), std::string::npos) << messages(bad);
  EXPECT_NE(messages(bad).find("sink.http.secrets[1]: the webhook secret must be"), std::string::npos) << messages(bad);
  EXPECT_EQ(messages(bad).find("hunter2"), std::string::npos) << "the secret is never echoed";
}

// sink.nats_jetstream: the stream is required; the rest has defaults; the lease check counts its
// publish_timeout.
TEST(RelayConfig, NatsSinkNeedsItsStream) {
  const std::string base =
      "postgres: { dsn: x }\nsink:\n  type: nats_jetstream\n  nats_jetstream: { url: nats://h:4222";
  const auto missing = config::load_relay_config_text(base + " }\n", "a.yaml", env({}));
  EXPECT_NE(messages(missing).find("sink.nats_jetstream.stream is required"), std::string::npos) << messages(missing);
  const auto good =
      config::load_relay_config_text(base + ", stream: OUTBOX, publish_timeout: 2s }\n", "b.yaml", env({}));
  ASSERT_TRUE(good.config) << messages(good);
  EXPECT_EQ(good.config->sink.kind, config::SinkKind::nats_jetstream);
  EXPECT_EQ(good.config->sink.nats.stream, "OUTBOX");
  EXPECT_EQ(good.config->sink.nats.subject.text, "outbox.{aggregate_type}");
  EXPECT_EQ(good.config->sink.nats.publish_timeout, 2s);
  EXPECT_EQ(good.config->sink.nats.max_in_flight, 256u);
  const auto slow = config::load_relay_config_text(
      "relay: { lease: 5s }\n" + base + ", stream: OUTBOX, publish_timeout: 10s }\n", "c.yaml", env({}));
  EXPECT_NE(messages(slow).find("relay.lease (5s) must exceed the sink's timeout"), std::string::npos)
      << messages(slow);
}

// https:// turns TLS on (port 443 by default); sink.http.tls tunes it like idemproxy's upstream.tls,
// and a file it names must be readable at load, reported at its line and column.
TEST(RelayConfig, HttpsSinkUrlTurnsTlsOnAndItsFilesAreCheckedAtLoad) {
  const auto secret = env({{"S", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}});
  const std::string head = "postgres: { dsn: x }\nsink:\n  type: http\n  http:\n    secret: \"${S}\"\n";
  const auto plain_default =
      config::load_relay_config_text(head + "    url: https://hooks.example/in\n", "a.yaml", secret);
  ASSERT_TRUE(plain_default.config) << messages(plain_default);
  EXPECT_TRUE(plain_default.config->sink.http.tls.enabled);
  EXPECT_TRUE(plain_default.config->sink.http.tls.verify);
  EXPECT_EQ(plain_default.config->sink.http.port, 443);
  EXPECT_EQ(plain_default.config->sink.http.host, "hooks.example");

  const std::string ca =
      std::string(IDEM_SOURCE_DIR) + "/CMakeLists.txt";  // readable: only its presence is checked here
  const auto tuned = config::load_relay_config_text(
      head + "    url: https://127.0.0.1:8443/in\n    tls: { ca_file: \"" + ca + "\", server_name: hooks.internal }\n",
      "b.yaml", secret);
  ASSERT_TRUE(tuned.config) << messages(tuned);
  EXPECT_EQ(tuned.config->sink.http.port, 8443);
  EXPECT_EQ(tuned.config->sink.http.tls.ca_file, ca);
  EXPECT_EQ(tuned.config->sink.http.tls.server_name, "hooks.internal");

  const auto missing = config::load_relay_config_text(
      head + "    url: https://127.0.0.1:8443/in\n    tls: { ca_file: /nonexistent/ca.pem }\n", "c.yaml", secret);
  EXPECT_FALSE(missing.config);
  EXPECT_NE(messages(missing).find("c.yaml:7:21: sink.http.tls.ca_file: cannot read \"/nonexistent/ca.pem\""),
            std::string::npos)
      << messages(missing);

  const auto half = config::load_relay_config_text(
      head + "    url: https://127.0.0.1:8443/in\n    tls: { cert_file: \"" + ca + "\" }\n", "d.yaml", secret);
  EXPECT_NE(messages(half).find("sink.http.tls: a client certificate needs both cert_file and key_file"),
            std::string::npos)
      << messages(half);

  const auto ignored = config::load_relay_config_text(
      head + "    url: http://127.0.0.1:8080/in\n    tls: { verify: false }\n", "e.yaml", secret);
  ASSERT_TRUE(ignored.config) << messages(ignored);
  EXPECT_FALSE(ignored.config->sink.http.tls.enabled);
  EXPECT_NE(messages(ignored).find("e.yaml:7:5: warning: sink.http.tls is ignored: sink.http.url is not https://"),
            std::string::npos)
      << messages(ignored);

  const auto other = config::load_relay_config_text(head + "    url: ftp://127.0.0.1/in\n", "f.yaml", secret);
  EXPECT_NE(messages(other).find("sink.http.url must be http[s]://host[:port]/path"), std::string::npos)
      << messages(other);
}

TEST(MessageTemplate, PlaceholdersAreFilledAndEscapedForUrls) {
  std::string error;
  const auto parsed =
      config::parse_message_template("/e/{aggregate_type}/{aggregate_id}/{event_id}?t={event_type}&x={{y}}", error);
  ASSERT_TRUE(parsed) << error;
  OutboxRow row;
  row.id = 42;
  row.aggregate_type = "order";
  row.aggregate_id = "a/b c";
  row.event_type = "order.created";
  EXPECT_EQ(render(*parsed, row, TemplateEscaping::url_segment), "/e/order/a%2Fb%20c/42?t=order.created&x={y}");
  EXPECT_EQ(render(*parsed, row, TemplateEscaping::none), "/e/order/a/b c/42?t=order.created&x={y}");
  EXPECT_FALSE(config::parse_message_template("x.{nope}", error));
  EXPECT_NE(error.find("unknown placeholder {nope}"), std::string::npos);
  EXPECT_FALSE(config::parse_message_template("x.{event_id", error));
  EXPECT_FALSE(config::parse_message_template("x}", error));
}

TEST(Backoff, DoublesWithJitterUpToTheCap) {
  Backoff backoff(100ms, 1s);
  for (int round = 0; round < 50; ++round) {
    const auto first = backoff.delay(1);
    EXPECT_GE(first, 50ms);
    EXPECT_LE(first, 100ms);
    const auto third = backoff.delay(3);
    EXPECT_GE(third, 200ms);
    EXPECT_LE(third, 400ms);
    const auto late = backoff.delay(60);
    EXPECT_GE(late, 500ms);
    EXPECT_LE(late, 1s);
  }
}

TEST(WebhookSignature, MatchesTheStandardWebhooksReferenceVector) {
  // The reference example of the Standard Webhooks specification.
  const auto signer = WebhookSigner::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  ASSERT_TRUE(signer);
  EXPECT_EQ(signer->sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})"),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  EXPECT_FALSE(WebhookSigner::from_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
  EXPECT_FALSE(WebhookSigner::from_secret("whsec_c2hvcnQ="));  // 5 bytes: too short
  EXPECT_EQ(crypto::base64_decode("aGVsbG8="), std::optional<std::string>("hello"));
  EXPECT_EQ(crypto::base64_encode("hello"), "aGVsbG8=");
}

// During a rotation every delivery carries one signature per secret, in the secrets' order.
TEST(WebhookSignature, EverySecretSignsDuringARotation) {
  const std::string reference = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const std::string other = "whsec_bmV3LXNlY3JldC1mb3ItdGVzdHMtMDI=";
  const auto both = WebhookSigner::from_secrets({other, reference});
  const auto alone = WebhookSigner::from_secret(other);
  ASSERT_TRUE(both && alone);
  EXPECT_EQ(both->secrets(), 2u);
  const std::string id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const std::string body = R"({"test": 2432232314})";
  EXPECT_EQ(both->sign(id, 1614265330, body),
            alone->sign(id, 1614265330, body) + " v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  EXPECT_FALSE(WebhookSigner::from_secrets({}));
  EXPECT_FALSE(WebhookSigner::from_secrets({other, "whsec_c2hvcnQ="}));
}

TEST(HttpSink, BodyIsTheStandardWebhooksEnvelope) {
  OutboxRow row;
  row.id = 7;
  row.aggregate_type = "order";
  row.aggregate_id = "o\"1";
  row.event_type = "order.paid";
  row.payload = R"({"amount": 5})";
  row.headers = R"({"trace": "t"})";
  row.created_at = "2026-01-02T03:04:05.000006Z";
  EXPECT_EQ(HttpSink::body_for(row),
            R"({"type":"order.paid","timestamp":"2026-01-02T03:04:05.000006Z","data":{"amount": 5},"event_id":"7",)"
            R"("aggregate_type":"order","aggregate_id":"o\"1","headers":{"trace": "t"}})");
}

// 409 is what the consumer's inbox (idemproxy) answers while an earlier delivery of the same
// event still runs there, e.g. the one whose response the relay lost: not the row's fault.
TEST(HttpSink, ConflictIsRetriedLikeTimeoutAndTooManyRequests) {
  EXPECT_EQ(HttpSink::outcome_of_status(200), DeliveryOutcome::delivered);
  EXPECT_EQ(HttpSink::outcome_of_status(204), DeliveryOutcome::delivered);
  EXPECT_EQ(HttpSink::outcome_of_status(409), DeliveryOutcome::retry);
  EXPECT_EQ(HttpSink::outcome_of_status(408), DeliveryOutcome::retry);
  EXPECT_EQ(HttpSink::outcome_of_status(429), DeliveryOutcome::retry);
  EXPECT_EQ(HttpSink::outcome_of_status(302), DeliveryOutcome::retry);
  EXPECT_EQ(HttpSink::outcome_of_status(500), DeliveryOutcome::retry);
  EXPECT_EQ(HttpSink::outcome_of_status(503), DeliveryOutcome::retry);
  EXPECT_EQ(HttpSink::outcome_of_status(400), DeliveryOutcome::poison);
  EXPECT_EQ(HttpSink::outcome_of_status(404), DeliveryOutcome::poison);
  EXPECT_EQ(HttpSink::outcome_of_status(422), DeliveryOutcome::poison);
}

TEST(SessionOptions, StatementTimeoutAndJitOffJoinTheDsnOptions) {
  EXPECT_EQ(with_session_settings("host=db dbname=app", 4500ms),
            "dbname='app' host='db' options='-c statement_timeout=4500 -c jit=off'");
  EXPECT_EQ(with_session_settings("postgresql://u@db/app?options=-c%20search_path%3Dx", 900ms),
            "user='u' dbname='app' host='db' options='-c search_path=x -c statement_timeout=900 -c jit=off'");
  EXPECT_EQ(with_session_settings("not a dsn ===", 900ms), "not a dsn ===");
}

}  // namespace
}  // namespace idem::relay

TEST(ParkedRows, AggregateSplitsAtTheFirstSlash) {
  const auto ref = idem::relay::parse_aggregate("order/eu/42");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->type, "order");
  EXPECT_EQ(ref->id, "eu/42");
  EXPECT_FALSE(idem::relay::parse_aggregate("order"));
  EXPECT_FALSE(idem::relay::parse_aggregate("/42"));
  EXPECT_FALSE(idem::relay::parse_aggregate("order/"));
}

TEST(ParkedRows, QueryStringTakesAnEncodedAggregateAndABoundedLimit) {
  const auto parsed = idem::relay::parse_parked_query_string("limit=7&aggregate=order%2Feu%2F42");
  ASSERT_TRUE(parsed.query) << parsed.error;
  EXPECT_EQ(parsed.query->limit, 7u);
  ASSERT_TRUE(parsed.query->aggregate);
  EXPECT_EQ(parsed.query->aggregate->id, "eu/42");
  const auto none = idem::relay::parse_parked_query_string("");
  ASSERT_TRUE(none.query);
  EXPECT_EQ(none.query->limit, idem::relay::kDefaultParkedLimit);
  EXPECT_FALSE(none.query->aggregate);
  EXPECT_EQ(idem::relay::parse_parked_query_string("limit=0").error, "limit takes a number from 1 to 1000");
  EXPECT_EQ(idem::relay::parse_parked_query_string("limit=1001").error, "limit takes a number from 1 to 1000");
  EXPECT_EQ(idem::relay::parse_parked_query_string("aggregate=%zz").error, "bad percent-encoding in aggregate");
  EXPECT_EQ(idem::relay::parse_parked_query_string("order=1").error, "unknown parameter order (aggregate, limit)");
}

TEST(ParkedRows, JsonEscapesWhatTheWriterAndTheSinkPutThere) {
  idem::relay::ParkedList list;
  list.total = 3;
  list.limit = 1;
  list.rows.push_back(idem::relay::ParkedRow{.id = 9,
                                             .aggregate_type = "order",
                                             .aggregate_id = "a\"b",
                                             .event_type = "paid",
                                             .attempts = 5,
                                             .last_error = "line1\nline2",
                                             .parked_at = "2026-11-26T00:00:00.000000Z",
                                             .held_behind = 12});
  EXPECT_EQ(idem::relay::parked_json(list),
            "{\"total\":3,\"limit\":1,\"truncated\":true,\"parked\":[\n"
            "{\"id\":9,\"aggregate_type\":\"order\",\"aggregate_id\":\"a\\\"b\",\"event_type\":\"paid\",\"attempts\":5,"
            "\"parked_at\":\"2026-11-26T00:00:00.000000Z\",\"held_behind\":12,\"last_error\":\"line1\\nline2\"}\n"
            "]}\n");
  EXPECT_EQ(idem::relay::parked_json(idem::relay::ParkedList{.rows = {}, .total = 0, .limit = 100}),
            "{\"total\":0,\"limit\":100,\"truncated\":false,\"parked\":[]}\n");
}
