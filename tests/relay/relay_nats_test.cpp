// The NATS JetStream sink end to end: a private nats-server (JetStream on), real idemrelay
// processes, the suite's Postgres. What a consumer of the stream relies on: each event once
// (Nats-Msg-Id deduplication over the stream's duplicate window), in order per aggregate, nothing
// lost when the server goes away, and a message too large for the server parked with a reason.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "relay/nats_env.hpp"
#include "relay/relay_env.hpp"
#include "relay/relay_faults.hpp"
#include "relay/relay_fixture.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

class RelayNats : public RelayFixture {
 protected:
  void use_nats(NatsServer& server, std::chrono::milliseconds duplicates = 60s) {
    settings_.nats_url = server.url();
    settings_.nats_stream = "S" + prefix_;
    create_stream(server.url(), settings_.nats_stream, prefix_ + ".>", duplicates);
  }
  // What the stream holds, as stream entries for audit(): event id and aggregate from each message.
  std::vector<StreamEntry> entries(NatsServer& server) {
    std::vector<StreamEntry> out;
    for (const NatsMessage& message : read_stream_messages(server.url(), settings_.nats_stream)) {
      const boost::json::object body = boost::json::parse(message.body).as_object();
      StreamEntry entry;
      entry.fields["event_id"] = std::string(body.at("event_id").as_string());
      EXPECT_EQ(message.msg_id, entry.fields["event_id"]) << "Nats-Msg-Id is the event id";
      entry.fields["aggregate_type"] = std::string(body.at("aggregate_type").as_string());
      entry.fields["aggregate_id"] = std::string(body.at("aggregate_id").as_string());
      out.push_back(std::move(entry));
    }
    return out;
  }
  void expect_each_once_in_order(NatsServer& server, std::size_t events) {
    const auto stored = entries(server);
    const StreamAudit result = audit(stored);
    EXPECT_EQ(stored.size(), events);
    EXPECT_EQ(result.copies.size(), events);
    for (const auto& [id, copies] : result.copies) EXPECT_EQ(copies, 1) << "event " << id;
    EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  }
};

// kill -9 after the publish and before the mark: the restarted relay publishes the batch again
// with the same Nats-Msg-Id, the stream answers "duplicate", and keeps one message per event.
TEST_F(RelayNats, KilledBetweenPublishAndMarkLeavesNoDuplicateInTheStream) {
  NatsServer server(dir_->path());
  use_nats(server);
  for (const char* aggregate : {"a1", "a2", "a3"}) schema_->insert("order", aggregate, 10);
  settings_.batch_size = 100;
  settings_.concurrency = 1;
  FaultProxy postgres("127.0.0.1", suite_postgres_port());
  settings_.dsn = dsn_through(schema_->dsn(), postgres);
  const RelayRunner runner(dir_->path(), settings_);

  postgres.drop_next_request(settle_statement(), FaultProxy::AfterLoss::hang);
  Process crashing = runner.start("crashing");
  if (postgres.wait_fired(1, 15s)) crashing.kill9();
  ASSERT_EQ(crashing.wait_exit(15s), 137) << crashing.describe();
  EXPECT_EQ(entries(server).size(), 30u) << "the batch reached the stream";
  EXPECT_EQ(unpublished(), 30) << "...but was never marked";

  Process restarted = runner.start("restarted");
  ASSERT_TRUE(drained(20s)) << restarted.describe();
  ASSERT_EQ(restarted.terminate(10s), 0) << restarted.describe();
  expect_each_once_in_order(server, 30);
  EXPECT_EQ(stopped_field(restarted.stderr_text(), "duplicates"), 30) << "the stream deduplicated the re-publish";
}

// The server stopped for 10 s while rows keep coming: the relay backs off, charges no attempt,
// and publishes everything once, in order, when the server is back.
TEST_F(RelayNats, ServerStoppedTenSecondsUnderLoadLosesNothing) {
  NatsServer server(dir_->path());
  use_nats(server);
  settings_.batch_size = 50;
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  std::atomic<bool> writing{true};
  std::atomic<int> inserted{0};
  std::thread writer([&] {
    BlockingPg client = schema_->client();
    for (int n = 0; writing.load(); ++n) {
      client.query(
          "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) "
          "VALUES ('order', $1, 'e', '{}')",
          {"agg-" + std::to_string(n % 7)});
      ++inserted;
      std::this_thread::sleep_for(5ms);
    }
  });
  std::this_thread::sleep_for(1s);
  server.stop();
  std::this_thread::sleep_for(10s);
  server.start();
  std::this_thread::sleep_for(1s);
  writing = false;
  writer.join();
  ASSERT_TRUE(drained(30s)) << relay.describe() << server.describe();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  EXPECT_NE(relay.stderr_text().find("\"event\":\"backing_off\""), std::string::npos) << "the outage was seen";
  EXPECT_GT(inserted.load(), 1000) << "rows kept coming during the outage";
  expect_each_once_in_order(server, static_cast<std::size_t>(inserted.load()));
  EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE attempts > 0 OR parked_at IS NOT NULL"), 0)
      << "an outage is not the rows' fault";
}

// Two relays, 20 aggregates x 50 rows inserted concurrently: each once, in order per aggregate.
TEST_F(RelayNats, TwoRelaysKeepEveryAggregateInOrder) {
  NatsServer server(dir_->path());
  use_nats(server);
  settings_.batch_size = 40;
  const RelayRunner runner(dir_->path(), settings_);
  Process first = runner.start("relay-1");
  Process second = runner.start("relay-2");
  std::vector<std::thread> writers;
  for (int a = 0; a < 20; ++a) {
    writers.emplace_back([&, a] {
      BlockingPg client = schema_->client();
      for (int n = 0; n < 50; ++n) {
        client.query(
            "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) "
            "VALUES ('order', $1, 'e', '{}')",
            {"agg-" + std::to_string(a)});
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  ASSERT_TRUE(drained(30s)) << first.describe() << second.describe();
  EXPECT_EQ(first.terminate(10s), 0) << first.describe();
  EXPECT_EQ(second.terminate(10s), 0) << second.describe();
  expect_each_once_in_order(server, 1000);
}

// A row larger than the server's max_payload is parked at once with the sizes in last_error; its
// aggregate's later row waits behind it; other aggregates flow.
TEST_F(RelayNats, PayloadOverMaxPayloadIsParkedWithAClearError) {
  NatsServer server(dir_->path(), /*max_payload=*/4096);
  use_nats(server);
  const auto big = schema_->client().query(
      "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) "
      "VALUES ('order', 'big', 'e', jsonb_build_object('blob', repeat('x', 8000))) RETURNING id");
  schema_->insert("order", "big", 1);
  schema_->insert("order", "small", 3);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(eventually(
      [&] {
        return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL") == 1 &&
               entries(server).size() == 3;
      },
      15s))
      << relay.describe();
  const auto error = schema_->client().query("SELECT attempts, last_error FROM outbox WHERE id = $1", {*big.at(0)[0]});
  EXPECT_EQ(error.at(0)[0].value_or(""), "1") << "parked at once, not retried";
  EXPECT_NE(error.at(0)[1].value_or("").find("exceeds the server's max_payload (4096 bytes)"), std::string::npos)
      << error.at(0)[1].value_or("");
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
}

// A stream whose duplicate window is shorter than lease + max backoff could store a re-publish
// twice: the relay refuses to start and says why.
TEST_F(RelayNats, ShortDuplicateWindowIsRefusedAtStart) {
  NatsServer server(dir_->path());
  use_nats(server, 2s);  // lease 3s + backoff max 200ms
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  EXPECT_EQ(relay.wait_exit(15s), 1) << relay.describe();
  EXPECT_NE(relay.stderr_text().find("deduplicates over 2000 ms (duplicate_window), shorter than relay.lease"),
            std::string::npos)
      << relay.stderr_text();
}

}  // namespace
}  // namespace idem::test::relay
