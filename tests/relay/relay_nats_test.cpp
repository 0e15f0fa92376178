// The NATS JetStream sink end to end: a private nats-server (JetStream on), real idemrelay
// processes, the suite's Postgres. What a consumer of the stream relies on: each event once
// (Nats-Msg-Id deduplication over the stream's duplicate window), never a new event dropped as a
// duplicate of another that had its id (two outboxes, ids reused), in order per aggregate, nothing
// lost when the server goes away, a message too large for the server or on a subject the stream
// does not cover parked with a reason while the rest flows, and the stated outcome of an outage
// longer than the duplicate window.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "relay/nats_env.hpp"
#include "relay/relay_env.hpp"
#include "relay/relay_faults.hpp"
#include "relay/relay_fixture.hpp"
#include "relay/event_fingerprint.hpp"
#include "relay/http_sink.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

class RelayNats : public RelayFixture {
 protected:
  // The stream covers "<prefix>.>" unless `subjects` says otherwise ("*" for "<prefix>.*").
  void use_nats(NatsServer& server, std::chrono::milliseconds duplicates = 60s, const std::string& subjects = ">") {
    settings_.nats_url = server.url();
    settings_.nats_stream = "S" + prefix_;
    create_stream(server.url(), settings_.nats_stream, prefix_ + "." + subjects, duplicates);
  }
  // What the stream holds, as stream entries for audit(): event id and aggregate from each message.
  std::vector<StreamEntry> entries(NatsServer& server) {
    std::vector<StreamEntry> out;
    for (const NatsMessage& message : read_stream_messages(server.url(), settings_.nats_stream)) {
      const boost::json::object body = boost::json::parse(message.body).as_object();
      StreamEntry entry;
      entry.fields["event_id"] = std::string(body.at("event_id").as_string());
      EXPECT_TRUE(std::regex_match(message.msg_id, std::regex(entry.fields["event_id"] + ":[0-9a-f]{64}")))
          << "Nats-Msg-Id names the event (id and fingerprint): " << message.msg_id;
      entry.fields["aggregate_type"] = std::string(body.at("aggregate_type").as_string());
      entry.fields["aggregate_id"] = std::string(body.at("aggregate_id").as_string());
      out.push_back(std::move(entry));
    }
    return out;
  }
  // Copies of each event, told apart by aggregate (two outboxes hand out the same ids).
  std::map<std::pair<std::string, std::int64_t>, int> copies_by_aggregate(NatsServer& server) {
    std::map<std::pair<std::string, std::int64_t>, int> copies;
    for (const StreamEntry& entry : entries(server)) ++copies[{entry.fields.at("aggregate_id"), entry.event_id()}];
    return copies;
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

// Two services' outboxes relay into one stream and both hand out ids from 1: the second one's
// events are new events, not duplicates of the first one's (Nats-Msg-Id names the event).
TEST_F(RelayNats, TwoOutboxesWithCollidingIdsIntoOneStreamStoreEveryEventOnce) {
  NatsServer server(dir_->path());
  use_nats(server);
  OutboxSchema other("relay");
  const std::vector<std::int64_t> first_ids = schema_->insert("order", "from-first", 20);
  const std::vector<std::int64_t> second_ids = other.insert("order", "from-second", 20);
  ASSERT_EQ(first_ids, second_ids) << "the two outboxes hand out the same ids";
  const RelayRunner first(dir_->path(), settings_);
  RelaySettings second_settings = settings_;
  second_settings.dsn = other.dsn();
  const RelayRunner second(dir_->path(), second_settings);

  Process first_relay = first.start("relay-first");
  ASSERT_TRUE(drained(20s)) << first_relay.describe();
  Process second_relay = second.start("relay-second");
  ASSERT_TRUE(eventually(
      [&] { return other.client().scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0; }, 20s))
      << second_relay.describe();
  EXPECT_EQ(first_relay.terminate(10s), 0) << first_relay.describe();
  EXPECT_EQ(second_relay.terminate(10s), 0) << second_relay.describe();

  const auto copies = copies_by_aggregate(server);
  EXPECT_EQ(copies.size(), 40u) << "every event of both outboxes is in the stream";
  for (const auto& [event, count] : copies) EXPECT_EQ(count, 1) << event.first << " " << event.second;
  EXPECT_EQ(stopped_field(second_relay.stderr_text(), "duplicates"), 0)
      << "none of the second outbox's events was taken for one of the first's";
  EXPECT_NE(first_relay.stderr_text().find("\"probe_earlier_copies\":\"no\""), std::string::npos)
      << "an empty stream can hold no earlier version's copy: nothing probed\n"
      << first_relay.stderr_text();
}

// TRUNCATE ... RESTART IDENTITY hands the ids out again within the duplicate window: the new
// events reach the stream.
TEST_F(RelayNats, IdsReusedAfterTruncateRestartIdentityAreStoredNotDroppedAsDuplicates) {
  NatsServer server(dir_->path());
  use_nats(server);
  const std::vector<std::int64_t> before = schema_->insert("order", "before", 10);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(20s)) << relay.describe();
  schema_->client().query("TRUNCATE outbox RESTART IDENTITY");
  const std::vector<std::int64_t> after = schema_->insert("order", "after", 10);
  ASSERT_EQ(after, before) << "the ids were handed out again";
  ASSERT_TRUE(drained(20s)) << relay.describe();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();

  const auto copies = copies_by_aggregate(server);
  EXPECT_EQ(copies.size(), 20u) << "the events written after the truncate are in the stream";
  for (const auto& [event, count] : copies) EXPECT_EQ(count, 1) << event.first << " " << event.second;
  EXPECT_EQ(stopped_field(relay.stderr_text(), "duplicates"), 0);
}

// An aggregate_type whose subject the stream does not cover ("billing.invoice" under "<p>.*"): its
// row is charged an attempt per try and parked after max_attempts with the subject and the stream
// in last_error, counted apart; every other aggregate flows meanwhile and the relay never backs
// off as if the server were down.
TEST_F(RelayNats, ASubjectTheStreamDoesNotCoverIsThatRowsFailureWhileEveryOtherAggregateFlows) {
  NatsServer server(dir_->path());
  use_nats(server, 60s, "*");
  settings_.max_attempts = 5;
  settings_.backoff_initial = "2s";  // the bad row is retried for at least 4 s (jitter halves at most)
  settings_.backoff_max = "2s";
  settings_.admin_port = free_port();
  const std::vector<std::int64_t> bad = schema_->insert("billing.invoice", "b1", 2);
  schema_->insert("order", "early", 5);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  const std::string bad_id = std::to_string(bad.front());
  ASSERT_TRUE(eventually(
      [&] { return schema_->client().scalar_int("SELECT attempts FROM outbox WHERE id = $1", {bad_id}) >= 1; }, 10s))
      << relay.describe();
  for (int a = 0; a < 5; ++a) schema_->insert("order", "later-" + std::to_string(a), 5);
  ASSERT_TRUE(eventually(
      [&] {
        return schema_->client().scalar_int(
                   "SELECT count(*) FROM outbox WHERE aggregate_type = 'order' AND published_at IS NULL") == 0;
      },
      10s))
      << relay.describe();
  ASSERT_TRUE(eventually(
      [&] { return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL") == 1; },
      20s))
      << relay.describe();

  const auto parked = schema_->client().query(
      "SELECT attempts, last_error, (SELECT max(published_at) FROM outbox WHERE aggregate_id LIKE 'later-%') < "
      "parked_at FROM outbox WHERE id = $1 AND parked_at IS NOT NULL",
      {bad_id});
  ASSERT_EQ(parked.size(), 1u) << "the row on the uncovered subject is the one parked";
  EXPECT_EQ(parked[0][0].value_or(""), "5") << "parked after max_attempts, each try charged";
  EXPECT_NE(parked[0][1].value_or("").find("subject \"" + prefix_ + ".billing.invoice\" is not covered by stream \"" +
                                           settings_.nats_stream + "\" (subjects: " + prefix_ + ".*)"),
            std::string::npos)
      << parked[0][1].value_or("");
  EXPECT_EQ(parked[0][2].value_or(""), "t") << "the later aggregates went out while the bad row was still retried";
  EXPECT_EQ(schema_->client().scalar_int(
                "SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NULL AND parked_at IS NULL "
                "AND attempts = 0",
                {std::to_string(bad.back())}),
            1)
      << "its aggregate's next row waits behind it, untouched";
  ASSERT_TRUE(wait_for_port(settings_.admin_port, 5s)) << relay.describe();
  const HttpResponse metrics = send(settings_.admin_port, HttpRequest::get("/metrics"));
  EXPECT_NE(metrics.body.find("idemrelay_nats_subject_not_in_stream_total 5"), std::string::npos) << metrics.body;
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  EXPECT_EQ(relay.stderr_text().find("\"event\":\"backing_off\""), std::string::npos)
      << "the server was never taken for down:\n"
      << relay.stderr_text();
  EXPECT_EQ(entries(server).size(), 30u) << "every other event is in the stream";
}

// The stream's subjects are read again when they change under a running relay: narrowed, a row
// on a subject it no longer covers costs one round of "no responders" (taken for the server's
// state, no attempt) and is then charged as that row's failure; widened again, the row goes out
// within a second or so, before it is parked.
TEST_F(RelayNats, TheStreamsSubjectsAreReadAgainWhenAnOperatorChangesThem) {
  NatsServer server(dir_->path());
  use_nats(server);
  settings_.max_attempts = 20;
  settings_.backoff_initial = "200ms";
  settings_.backoff_max = "200ms";
  schema_->insert("order", "first", 1);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(10s)) << relay.describe();

  set_stream_subjects(server.url(), settings_.nats_stream, {prefix_ + ".*"});
  const std::string bad_id = std::to_string(schema_->insert("billing.invoice", "b1", 1).front());
  const auto bad_row = [&] {
    return schema_->client().query("SELECT attempts, last_error, published_at IS NOT NULL FROM outbox WHERE id = $1",
                                   {bad_id});
  };
  ASSERT_TRUE(eventually([&] { return bad_row().at(0)[0].value_or("0") != "0"; }, 10s)) << relay.describe();
  EXPECT_NE(bad_row().at(0)[1].value_or("").find("is not covered by stream"), std::string::npos)
      << bad_row().at(0)[1].value_or("");

  set_stream_subjects(server.url(), settings_.nats_stream, {prefix_ + ".*", prefix_ + ".billing.>"});
  ASSERT_TRUE(eventually([&] { return bad_row().at(0)[2].value_or("") == "t"; }, 10s)) << relay.describe();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  EXPECT_EQ(entries(server).size(), 2u);
  EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL"), 0);
}

// The README's stated outcome: a relay stopped after a publish and before its mark for longer than
// the stream's duplicate window re-publishes when it is back, and the stream stores the event a
// second time, under the same Nats-Msg-Id with the same body (consumers deduplicate on event_id).
TEST_F(RelayNats, RelayStoppedLongerThanTheDuplicateWindowStoresTheEventTwiceUnderOneId) {
  NatsServer server(dir_->path());
  use_nats(server, 4s);  // allowed (lease 3s + backoff.max 200ms), warned about
  schema_->insert("order", "a1", 10);
  settings_.concurrency = 1;
  FaultProxy postgres("127.0.0.1", suite_postgres_port());
  settings_.dsn = dsn_through(schema_->dsn(), postgres);
  const RelayRunner runner(dir_->path(), settings_);

  postgres.drop_next_request(settle_statement(), FaultProxy::AfterLoss::hang);
  Process crashing = runner.start("crashing");
  if (postgres.wait_fired(1, 15s)) crashing.kill9();
  ASSERT_EQ(crashing.wait_exit(15s), 137) << crashing.describe();
  ASSERT_EQ(read_stream_messages(server.url(), settings_.nats_stream).size(), 10u) << "the batch reached the stream";
  EXPECT_NE(crashing.stderr_text().find("\"event\":\"nats_duplicate_window_short\""), std::string::npos)
      << crashing.stderr_text();
  EXPECT_NE(crashing.stderr_text().find("for longer than 4s between publishing an event and marking it"),
            std::string::npos)
      << crashing.stderr_text();

  std::this_thread::sleep_for(6s);  // the relay stays down past the 4 s window: JetStream forgets the ids
  Process restarted = runner.start("restarted");
  ASSERT_TRUE(drained(20s)) << restarted.describe();
  ASSERT_EQ(restarted.terminate(10s), 0) << restarted.describe();

  std::map<std::string, std::vector<NatsMessage>> by_id;
  for (NatsMessage& message : read_stream_messages(server.url(), settings_.nats_stream)) {
    by_id[message.msg_id].push_back(std::move(message));
  }
  EXPECT_EQ(by_id.size(), 10u);
  for (const auto& [id, copies] : by_id) {
    ASSERT_EQ(copies.size(), 2u) << id << ": stored twice";
    EXPECT_EQ(copies[0].body, copies[1].body) << id << ": both copies carry the same event (event_id)";
  }
  EXPECT_EQ(stopped_field(restarted.stderr_text(), "duplicates"), 0) << "the window had passed";
  EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE attempts > 0 OR parked_at IS NOT NULL"), 0);
}

// Upgrading from a version whose Nats-Msg-Id was the bare outbox id: a row it published and did
// not mark is recognised under that id (no second copy), but another event that happens to have
// the same bare id (another database's) is not taken for it.
TEST_F(RelayNats, AnEarlierVersionsCopyUnderTheBareIdCountsAsPublishedAndAnotherEventsDoesNot) {
  NatsServer server(dir_->path());
  use_nats(server);
  schema_->insert("order", "u1", 3);
  std::vector<idem::relay::OutboxRow> rows;
  for (const PgRow& row :
       schema_->client().query("SELECT id, aggregate_type, aggregate_id, event_type, payload::text, headers::text, "
                               "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
                               "(extract(epoch FROM created_at) * 1000000)::int8 FROM outbox ORDER BY id")) {
    rows.push_back({.id = std::stoll(*row[0]),
                    .aggregate_type = *row[1],
                    .aggregate_id = *row[2],
                    .event_type = *row[3],
                    .payload = *row[4],
                    .headers = *row[5],
                    .created_at = *row[6],
                    .created_at_micros = std::stoll(*row[7]),
                    .attempts = 0,
                    .traceparent = {},
                    .tracestate = {}});
  }
  ASSERT_EQ(rows.size(), 3u);
  const std::string subject = prefix_ + ".order";
  // The earlier relay published the first two and was stopped before marking them...
  for (int i = 0; i < 2; ++i) {
    publish_message(server.url(), subject, std::to_string(rows[i].id), idem::relay::HttpSink::body_for(rows[i]));
  }
  // ...and another database's earlier relay published its own event under the third one's id.
  idem::relay::OutboxRow foreign = rows[2];
  foreign.aggregate_id = "elsewhere";
  foreign.payload = R"({"n": 99})";
  publish_message(server.url(), subject, std::to_string(foreign.id), idem::relay::HttpSink::body_for(foreign));

  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(20s)) << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();

  const std::vector<NatsMessage> messages = read_stream_messages(server.url(), settings_.nats_stream);
  std::multiset<std::string> ids;
  for (const NatsMessage& message : messages) ids.insert(message.msg_id);
  const std::multiset<std::string> expected = {
      std::to_string(rows[0].id), std::to_string(rows[1].id), std::to_string(rows[2].id),
      std::to_string(rows[2].id) + ":" + idem::relay::event_fingerprint(rows[2])};
  EXPECT_EQ(ids, expected) << "the earlier copies kept, the third event added under its own id";
  EXPECT_EQ(stopped_field(relay.stderr_text(), "duplicates"), 2) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("\"event\":\"event_id_reused\""), std::string::npos) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("\"probe_earlier_copies\":\"yes\""), std::string::npos) << relay.stderr_text();
}

// A row whose earlier copy is found still waits behind its aggregate's row that did not go through
// (here parked at once, too large): rows of an aggregate are settled in order.
TEST_F(RelayNats, ARowWithAnEarlierCopyStillWaitsBehindItsAggregatesParkedRow) {
  NatsServer server(dir_->path(), /*max_payload=*/4096);
  use_nats(server);
  schema_->client().query(
      "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) "
      "VALUES ('order', 'big', 'e', jsonb_build_object('blob', repeat('x', 8000)))");
  schema_->insert("order", "big", 1);
  const PgRow second = schema_->client()
                           .query("SELECT id, aggregate_type, aggregate_id, event_type, payload::text, headers::text, "
                                  "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
                                  "FROM outbox ORDER BY id DESC LIMIT 1")
                           .at(0);
  const idem::relay::OutboxRow row{.id = std::stoll(*second[0]),
                                   .aggregate_type = *second[1],
                                   .aggregate_id = *second[2],
                                   .event_type = *second[3],
                                   .payload = *second[4],
                                   .headers = *second[5],
                                   .created_at = *second[6],
                                   .created_at_micros = 0,
                                   .attempts = 0,
                                   .traceparent = {},
                                   .tracestate = {}};
  publish_message(server.url(), prefix_ + ".order", std::to_string(row.id), idem::relay::HttpSink::body_for(row));
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(eventually(
      [&] { return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL") == 1; },
      15s))
      << relay.describe();
  std::this_thread::sleep_for(500ms);  // a few more claims of the lane (poll 100 ms)
  EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NULL",
                                         {std::to_string(row.id)}),
            1)
      << "not settled ahead of the parked row";
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  EXPECT_NE(relay.stderr_text().find("\"event\":\"nats_earlier_copy_found\""), std::string::npos)
      << "its copy was found: " << relay.stderr_text();
}

// --check reads the stream and says what its duplicate window covers; short of the recommended
// hour it warns with the figure.
TEST_F(RelayNats, CheckSaysWhatTheDuplicateWindowCoversAndWarnsWhenItIsShort) {
  NatsServer server(dir_->path());
  use_nats(server, 4s);
  const RunResult short_window = RelayRunner(dir_->path(), settings_).run({"--check"});
  EXPECT_EQ(short_window.exit_status, 0) << short_window.stderr_text;
  EXPECT_NE(short_window.stdout_text.find("nats: warning: stream \"" + settings_.nats_stream +
                                          "\" deduplicates over 4s (duplicate_window): a relay stopped, or Postgres "
                                          "unreachable, for longer than 4s"),
            std::string::npos)
      << short_window.stdout_text;
  EXPECT_NE(short_window.stdout_text.find("(at least 1h)"), std::string::npos) << short_window.stdout_text;

  settings_.nats_stream = "L" + prefix_;
  create_stream(server.url(), settings_.nats_stream, prefix_ + "-long.>", 2h);
  const RunResult long_window = RelayRunner(dir_->path(), settings_).run({"--check"});
  EXPECT_EQ(long_window.exit_status, 0) << long_window.stderr_text;
  EXPECT_NE(long_window.stdout_text.find("nats: stream \"" + settings_.nats_stream + "\" deduplicates over 2h: covers"),
            std::string::npos)
      << long_window.stdout_text;
  EXPECT_EQ(long_window.stdout_text.find("warning"), std::string::npos) << long_window.stdout_text;
}

}  // namespace
}  // namespace idem::test::relay
