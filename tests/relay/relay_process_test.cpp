// The issue's relay behaviours, end to end: real idemrelay processes, the test Postgres (a private
// schema per test) and Redis (the shared one, with per-test key prefixes; a private server where
// the test stops it).
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "relay/relay_env.hpp"
#include "relay/relay_faults.hpp"
#include "relay/relay_fixture.hpp"
#include "support/env.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/private_redis.hpp"
#include "support/proxy_fixture.hpp"
#include "support/random_hex.hpp"
#include "support/test_pki.hpp"
#include "support/upstream_process.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

// Every test on the suite's Postgres and Redis (a private Redis where the test stops it).
class RelayProcess : public RelayFixture {
 protected:
  // Starts a relay and kill -9s it once it has published its first batch and sent that batch's
  // settle, which `postgres` keeps from the server: the batch is delivered and never marked. The
  // relay waits for the settle's answer for postgres.query_timeout (1 s) before retrying it; the
  // kill lands long before.
  static Process start_and_kill_before_first_mark(const RelayRunner& runner, FaultProxy& postgres) {
    postgres.drop_next_request(settle_statement(), FaultProxy::AfterLoss::hang);
    Process relay = runner.start("crashing");
    if (postgres.wait_fired(1, 15s)) relay.kill9();
    return relay;
  }
};

// A throwaway CA and, issued by it, an HTTPS consumer's certificate (localhost, 127.0.0.1) and a
// client certificate for the relay, under `dir`/pki.
struct ConsumerCertificates {
  CertificateFiles ca;
  CertificateFiles server;
  CertificateFiles client;
};
ConsumerCertificates make_consumer_certificates(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "pki");
  TestPki pki(dir / "pki");
  ConsumerCertificates made;
  made.ca = pki.make_ca("hooks-ca");
  made.server = pki.issue(made.ca, "hooks", "localhost", "DNS:localhost,IP:127.0.0.1", CertificateUse::server);
  made.client = pki.issue(made.ca, "relay-client", "idemrelay", "", CertificateUse::client);
  return made;
}

// 1. kill -9 between XADD and the mark: after a restart the stream holds one entry per event.
TEST_F(RelayProcess, CrashAfterPublishBeforeMarkLeavesOneEntryPerEvent) {
  for (const char* aggregate : {"a1", "a2", "a3"}) schema_->insert("order", aggregate, 10);
  settings_.batch_size = 100;
  // One worker, so one claim holds all 30 rows when the relay is killed: with two, a second
  // worker's claim can race the first, take one aggregate, and publish (and settle) first.
  settings_.concurrency = 1;
  FaultProxy postgres("127.0.0.1", suite_postgres_port());
  settings_.dsn = dsn_through(schema_->dsn(), postgres);
  const RelayRunner runner(dir_->path(), settings_);

  Process crashing = start_and_kill_before_first_mark(runner, postgres);
  ASSERT_EQ(crashing.wait_exit(15s), 137) << crashing.describe();
  EXPECT_EQ(read_stream(*redis_, stream("order")).size(), 30u) << "the batch reached the stream";
  EXPECT_EQ(unpublished(), 30) << "...but was never marked";

  Process restarted = runner.start("restarted");
  ASSERT_TRUE(drained(20s)) << restarted.describe();
  ASSERT_EQ(restarted.terminate(10s), 0) << restarted.describe();

  const auto entries = read_stream(*redis_, stream("order"));
  const StreamAudit result = audit(entries);
  EXPECT_EQ(entries.size(), 30u);
  EXPECT_EQ(result.copies.size(), 30u);
  for (const auto& [id, copies] : result.copies) EXPECT_EQ(copies, 1) << "event " << id;
  EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  EXPECT_EQ(stopped_field(restarted.stderr_text(), "duplicates"), 30) << "the re-publish hit the dedup markers";
}

// The outbox's database is restored from a dump taken before its last events (Redis kept): the
// identity hands out those events' ids again, to new events. The markers identify events, not
// ids: the restored rows that had been published are answered "duplicate" (one entry each), and
// the new events that reuse an id are added (with a warning), never dropped as duplicates.
TEST_F(RelayProcess, NewEventsReusingIdsAfterARestoreAreAddedNotDroppedAsDuplicates) {
  const std::string pg_bin =
      std::getenv("IDEM_PG_BIN") != nullptr ? std::getenv("IDEM_PG_BIN") : "/usr/lib/postgresql/15/bin";
  schema_->insert("order", "a", 3);  // ids 1-3: in the dump
  const auto dump = dir_->path() / "outbox.sql";
  const RunResult dumped = run_to_exit(
      ProcessSpec{.executable = pg_bin + "/pg_dump",
                  .args = {"--dbname", pg_dsn(), "--schema", schema_->name(), "--no-owner", "--file", dump.string()},
                  .env = {},
                  .log_dir = dir_->path(),
                  .name = "pg_dump"},
      30s);
  ASSERT_EQ(dumped.exit_status, 0) << dumped.stderr_text;
  schema_->insert("order", "a", 2);  // ids 4-5: after the dump
  {
    const RelayRunner runner(dir_->path(), settings_);
    Process relay = runner.start("before-restore");
    ASSERT_TRUE(drained(20s)) << relay.describe();
    ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
  }
  ASSERT_EQ(read_stream(*redis_, stream("order")).size(), 5u);

  // A fresh database on the same server, the dump restored into it, two new events (ids 4-5 again).
  const std::string database = "restored_" + random_hex(8);
  BlockingPg(pg_dsn()).query("CREATE DATABASE " + database);
  const std::string server_dsn = std::regex_replace(pg_dsn(), std::regex(R"(dbname=\S+)"), "dbname=" + database);
  struct DropDatabase {
    std::string name;
    ~DropDatabase() {
      try {
        BlockingPg(pg_dsn()).query("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      } catch (const std::exception&) {  // best effort
      }
    }
  } drop{database};
  const RunResult restored = run_to_exit(
      ProcessSpec{.executable = pg_bin + "/psql",
                  .args = {"--dbname", server_dsn, "-v", "ON_ERROR_STOP=1", "--quiet", "--file", dump.string()},
                  .env = {},
                  .log_dir = dir_->path(),
                  .name = "psql"},
      30s);
  ASSERT_EQ(restored.exit_status, 0) << restored.stderr_text;
  const std::string restored_dsn = dsn_with_search_path(server_dsn, schema_->name());
  BlockingPg fresh(restored_dsn);
  const std::vector<PgRow> reused = fresh.query(
      "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) "
      "SELECT 'order', 'a', 'after-restore', jsonb_build_object('new', g) FROM generate_series(1, 2) AS g ORDER BY g "
      "RETURNING id");
  ASSERT_EQ(reused.size(), 2u);
  EXPECT_EQ(*reused[0][0], "4") << "the restored identity hands out the old ids again";

  settings_.dsn = restored_dsn;
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("after-restore");
  ASSERT_TRUE(
      eventually([&] { return fresh.scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0; }, 20s))
      << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
  const std::string log = relay.stderr_text();

  const auto entries = read_stream(*redis_, stream("order"));
  ASSERT_EQ(entries.size(), 7u) << "5 before the restore, and the 2 new events";
  const StreamAudit result = audit(entries);
  for (const std::int64_t id : {1, 2, 3})
    EXPECT_EQ(result.copies.at(id), 1) << "restored event " << id << " added again";
  for (const std::int64_t id : {4, 5}) EXPECT_EQ(result.copies.at(id), 2) << "two different events with id " << id;
  EXPECT_EQ(entries[5].fields.at("event_type"), "after-restore");
  EXPECT_EQ(entries[6].fields.at("event_type"), "after-restore");
  EXPECT_EQ(stopped_field(log, "duplicates"), 3) << "the restored rows were answered by their markers";
  EXPECT_EQ(stopped_field(log, "published"), 5);
  EXPECT_NE(log.find("\"event\":\"event_id_reused\""), std::string::npos) << log;
}

// 2. Two relays, 20 aggregates x 50 rows inserted concurrently: each row once, in order per aggregate.
TEST_F(RelayProcess, TwoRelaysKeepEveryAggregateInOrder) {
  settings_.batch_size = 40;
  const RelayRunner runner(dir_->path(), settings_);
  Process first = runner.start("relay-1");
  Process second = runner.start("relay-2");

  constexpr int kAggregates = 20;
  constexpr int kRowsEach = 50;
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int a = 0; a < kAggregates; ++a) {
    writers.emplace_back([&, a] {
      try {
        BlockingPg client = schema_->client();
        for (int n = 0; n < kRowsEach; ++n) {  // one transaction per row: the writers interleave
          client.query(
              "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', $1, 'e', '{}')",
              {"agg-" + std::to_string(a)});
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  ASSERT_EQ(failures.load(), 0);

  ASSERT_TRUE(drained(30s)) << first.describe() << second.describe();
  const auto entries = read_stream(*redis_, stream("order"));
  const StreamAudit result = audit(entries);
  EXPECT_EQ(entries.size(), static_cast<std::size_t>(kAggregates * kRowsEach));
  EXPECT_EQ(result.copies.size(), static_cast<std::size_t>(kAggregates * kRowsEach));
  for (const auto& [id, copies] : result.copies) ASSERT_EQ(copies, 1) << "event " << id;
  EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  EXPECT_EQ(first.terminate(10s), 0) << first.describe();
  EXPECT_EQ(second.terminate(10s), 0) << second.describe();
}

// 3. A long transaction commits its lower id after a higher one was published; a rolled-back row never exists.
TEST_F(RelayProcess, RowCommittedLateWithLowerIdIsStillPublished) {
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");

  BlockingPg a = schema_->client();
  BlockingPg b = schema_->client();
  BlockingPg c = schema_->client();
  const auto insert = [](BlockingPg& client, const std::string& aggregate) {
    return client.scalar_int(
        "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', $1, 'e', '{}') "
        "RETURNING id",
        {aggregate});
  };
  a.query("BEGIN");
  const std::int64_t id_a = insert(a, "agg-a");
  b.query("BEGIN");
  const std::int64_t id_b = insert(b, "agg-b");
  ASSERT_LT(id_a, id_b);
  b.query("COMMIT");
  const auto published = [&](std::int64_t id) {
    const auto entries = read_stream(*redis_, stream("order"));
    return std::any_of(entries.begin(), entries.end(), [&](const StreamEntry& e) { return e.event_id() == id; });
  };
  ASSERT_TRUE(eventually([&] { return published(id_b); }, 10s)) << relay.describe();
  c.query("BEGIN");
  const std::int64_t id_c = insert(c, "agg-c");
  c.query("ROLLBACK");
  std::this_thread::sleep_for(300ms);  // several polls pass with id_a still uncommitted
  EXPECT_FALSE(published(id_a));
  a.query("COMMIT");
  ASSERT_TRUE(eventually([&] { return published(id_a); }, 10s)) << relay.describe();

  const auto entries = read_stream(*redis_, stream("order"));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].event_id(), id_b) << "published in commit order";
  EXPECT_EQ(entries[1].event_id(), id_a);
  EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE id = $1", {std::to_string(id_c)}), 0);
  EXPECT_EQ(unpublished(), 0);
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
}

// 4. Redis stopped for 10 s under load: nothing lost, backoff visible, drained in order after.
TEST_F(RelayProcess, RedisOutageBacksOffAndDrainsInOrder) {
  PrivateRedis redis_server(dir_->path() / "private-redis");
  const std::uint16_t port = redis_server.port();
  settings_.redis_port = port;
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");

  std::atomic<int> inserted{0};
  std::atomic<bool> writer_failed{false};
  // A jthread: whatever assertion ends the test, the writer is stopped and joined.
  std::jthread writer([&](std::stop_token stop) {
    try {
      BlockingPg client = schema_->client();
      for (int n = 0; !stop.stop_requested() && n < 5'000; ++n) {
        client.query(
            "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', $1, 'e', '{}')",
            {"agg-" + std::to_string(n % 5)});
        ++inserted;
        std::this_thread::sleep_for(10ms);
      }
    } catch (const std::exception&) {
      writer_failed = true;
    }
  });
  std::this_thread::sleep_for(1s);
  {
    RedisClient control(port);
    try {
      control.command({"SHUTDOWN", "SAVE"});  // the connection closes: no reply
    } catch (const std::exception&) {
    }
  }
  ASSERT_TRUE(redis_server.wait_exit(10s).has_value()) << redis_server.describe();
  const int before_outage = inserted.load();
  std::this_thread::sleep_for(10s);
  EXPECT_GT(unpublished(), 0) << "rows waited during the outage";
  redis_server.restart();  // loads the dump.rdb SHUTDOWN SAVE wrote: the stream keeps its entries
  std::this_thread::sleep_for(500ms);
  writer.request_stop();
  writer.join();
  ASSERT_FALSE(writer_failed.load());
  // About 1,000 on a quiet machine (one per 10 ms); a loaded one managed 488. Fifty show it went on.
  ASSERT_GT(inserted.load(), before_outage + 50) << "the writer kept going through the outage";

  ASSERT_TRUE(drained(20s)) << relay.describe();
  RedisClient private_client(port);
  const auto entries = read_stream(private_client, stream("order"));
  const StreamAudit result = audit(entries);
  EXPECT_EQ(entries.size(), static_cast<std::size_t>(inserted.load()));
  EXPECT_EQ(result.copies.size(), static_cast<std::size_t>(inserted.load()));
  for (const auto& [id, copies] : result.copies) ASSERT_EQ(copies, 1) << "event " << id;
  EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  const std::string log = relay.stderr_text();
  EXPECT_NE(log.find("\"event\":\"backing_off\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"event\":\"relay_recovered\""), std::string::npos) << log;
  EXPECT_GT(stopped_field(log, "published"), 0);
}

// 5. A poison row is parked after N attempts; its aggregate waits, others flow; --redrive resumes in order.
TEST_F(RelayProcess, PoisonRowParksOnlyItsAggregateUntilRedriven) {
  settings_.max_attempts = 3;
  // The "blocked" stream name holds a string: XADD fails with WRONGTYPE for that aggregate type.
  redis_->command({"SET", stream("blocked"), "not a stream"});
  const auto blocked = schema_->insert("blocked", "b1", 3);
  schema_->insert("order", "o1", 5);
  schema_->insert("order", "o2", 5);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");

  const std::string head = std::to_string(blocked[0]);
  ASSERT_TRUE(eventually(
      [&] { return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL") == 1; },
      15s))
      << relay.describe();
  auto client = schema_->client();
  EXPECT_EQ(client.scalar_int("SELECT attempts FROM outbox WHERE id = $1 AND parked_at IS NOT NULL", {head}), 3);
  EXPECT_NE(client.query("SELECT last_error FROM outbox WHERE id = $1", {head})[0][0].value_or("").find("WRONGTYPE"),
            std::string::npos);
  ASSERT_TRUE(eventually([&] { return read_stream(*redis_, stream("order")).size() == 10; }, 10s))
      << "other aggregates flow";
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE aggregate_id = 'b1' AND published_at IS NULL AND "
                              "parked_at IS NULL AND attempts = 0"),
            2)
      << "the aggregate's later rows wait untouched behind the parked one";

  const RunResult not_parked = runner.run({"--redrive", std::to_string(blocked[1])});
  EXPECT_EQ(not_parked.exit_status, 1) << not_parked.stderr_text;
  redis_->command({"DEL", stream("blocked")});
  const RunResult redriven = runner.run({"--redrive", head});
  ASSERT_EQ(redriven.exit_status, 0) << redriven.stderr_text;
  EXPECT_NE(redriven.stdout_text.find("redriven 1 row(s) " + head), std::string::npos) << redriven.stdout_text;

  ASSERT_TRUE(drained(10s)) << relay.describe();
  const auto entries = read_stream(*redis_, stream("blocked"));
  ASSERT_EQ(entries.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(entries[i].event_id(), blocked[i]);
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  const std::string log = relay.stderr_text();
  EXPECT_TRUE(std::regex_search(log, std::regex(R"("event":"row_parked"[^\n]*"reason":"max_attempts")"))) << log;
  EXPECT_EQ(stopped_field(log, "parked"), 1);
}

// 6. Retention deletes only published rows older than max_age, in batches.
TEST_F(RelayProcess, RetentionDeletesOnlyOldPublishedRowsInBatches) {
  const auto ids = schema_->insert("order", "r1", 25);
  auto client = schema_->client();
  const auto id_list = [&](std::size_t from, std::size_t to) {
    std::string list;
    for (std::size_t i = from; i < to; ++i) list += (list.empty() ? "" : ",") + std::to_string(ids[i]);
    return list;
  };
  client.query("UPDATE outbox SET published_at = now() - interval '2 hours' WHERE id IN (" + id_list(0, 20) + ")");
  client.query("UPDATE outbox SET published_at = now() - interval '10 minutes' WHERE id IN (" + id_list(20, 23) + ")");
  // Old but never published (parked, so the relay leaves them alone): never deleted.
  client.query("UPDATE outbox SET created_at = now() - interval '3 hours', parked_at = now() WHERE id IN (" +
               id_list(23, 25) + ")");
  settings_.retention = "1h";
  settings_.retention_batch = 6;
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");

  ASSERT_TRUE(eventually([&] { return client.scalar_int("SELECT count(*) FROM outbox") == 5; }, 10s))
      << relay.describe();
  std::this_thread::sleep_for(500ms);  // more rounds run: nothing else goes
  const auto left = client.query("SELECT id FROM outbox ORDER BY id");
  ASSERT_EQ(left.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(std::stoll(*left[i][0]), ids[20 + i]);
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  const std::string log = relay.stderr_text();
  EXPECT_NE(log.find("\"rows\":20,\"statements\":4"), std::string::npos) << "6 + 6 + 6 + 2, one statement each:\n"
                                                                         << log;
  EXPECT_EQ(stopped_field(log, "retention_deleted"), 20);
}

// 7. SIGTERM mid-batch: exit 0, no row left claimed, nothing lost, nothing published twice.
TEST_F(RelayProcess, SigtermMidBatchLosesNothingAndDuplicatesNothing) {
  for (int a = 0; a < 40; ++a) schema_->insert("order", "agg-" + std::to_string(a), 50);
  settings_.batch_size = 100;
  const RelayRunner runner(dir_->path(), settings_);
  Process first = runner.start("first");
  ASSERT_TRUE(eventually([&] { return read_stream(*redis_, stream("order")).size() >= 200; }, 15s)) << first.describe();
  ASSERT_EQ(first.terminate(10s), 0) << first.describe();

  auto client = schema_->client();
  EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE claimed_by IS NOT NULL"), 0)
      << "batches finished or released";
  const std::int64_t marked = client.scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL");
  EXPECT_EQ(static_cast<std::int64_t>(read_stream(*redis_, stream("order")).size()), marked)
      << "every row in the stream was marked, every marked row is in the stream";
  EXPECT_LT(marked, 2000) << "stopped mid-way";

  Process second = runner.start("second");
  ASSERT_TRUE(drained(30s)) << second.describe();
  ASSERT_EQ(second.terminate(10s), 0) << second.describe();
  const auto entries = read_stream(*redis_, stream("order"));
  const StreamAudit result = audit(entries);
  EXPECT_EQ(entries.size(), 2000u);
  for (const auto& [id, copies] : result.copies) ASSERT_EQ(copies, 1) << "event " << id;
  EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  EXPECT_EQ(stopped_field(second.stderr_text(), "duplicates"), 0);
}

// 8. HTTP sink -> idemproxy (the inbox) -> counting upstream: every event executes once even when re-sent.
TEST_F(RelayProcess, HttpSinkThroughIdemproxyExecutesEachEventOnce) {
  ProxyHarness proxy;
  proxy.start();
  // Event ids become webhook-ids in the proxy's shared table: start far from other runs' ids.
  const std::string base = std::to_string(1'000'000'000LL + std::stoll(random_hex(8), nullptr, 16) % 1'000'000'000LL);
  schema_->client().query("ALTER TABLE outbox ALTER COLUMN id RESTART WITH " + base);
  const auto first = schema_->insert("order", "h1", 10, "created");
  const auto second = schema_->insert("order", "h2", 10, "created");
  settings_.http = true;
  settings_.http_url = "http://127.0.0.1:" + std::to_string(proxy.proxy_port()) + "/webhooks/{event_type}";
  settings_.batch_size = 100;
  FaultProxy postgres("127.0.0.1", suite_postgres_port());
  settings_.dsn = dsn_through(schema_->dsn(), postgres);
  const RelayRunner runner(dir_->path(), settings_);

  Process crashing = start_and_kill_before_first_mark(runner, postgres);
  ASSERT_EQ(crashing.wait_exit(15s), 137) << crashing.describe() << proxy.diagnostics();
  EXPECT_EQ(unpublished(), 20) << "delivered but never marked: the next relay sends them again";
  EXPECT_EQ(proxy.upstream_total(), 20u);

  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(20s)) << relay.describe() << proxy.diagnostics();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  EXPECT_EQ(stopped_field(relay.stderr_text(), "published"), 20) << "all 20 were sent again";
  EXPECT_EQ(proxy.upstream_total(), 20u) << "the inbox answered the re-sends from its records";
  for (const std::int64_t id : first) EXPECT_EQ(proxy.upstream_webhook_count(std::to_string(id)), 1u) << id;
  for (const std::int64_t id : second) EXPECT_EQ(proxy.upstream_webhook_count(std::to_string(id)), 1u) << id;
}

// 8b. An https:// consumer: its certificate is verified before anything is sent. Untrusted (the
//     throwaway CA is not in the system's store), nothing is delivered and the log says why; with
//     the CA configured, every event arrives once, over TLS.
TEST_F(RelayProcess, HttpsSinkDeliversOnlyToAVerifiedConsumer) {
  const auto [ca, server, client] = make_consumer_certificates(dir_->path());
  TestUpstream consumer = start_test_upstream_tls(dir_->path(), TestUpstreamTls{server.cert, server.key, {}}, "hooks");
  const auto ids = schema_->insert("order", "tls1", 5, "created");
  settings_.http = true;
  settings_.http_url = "https://localhost:" + std::to_string(consumer.tls_port) + "/hooks/{event_type}";

  {
    const RelayRunner untrusted_runner(dir_->path(), settings_);
    Process untrusted = untrusted_runner.start("untrusted");
    ASSERT_TRUE(
        eventually([&] { return untrusted.stderr_text().find("certificate verify failed") != std::string::npos; }, 10s))
        << untrusted.describe();
    EXPECT_NE(untrusted.stderr_text().find(
                  "TLS to localhost: certificate verify failed: unable to get local issuer certificate"),
              std::string::npos)
        << untrusted.stderr_text();
    EXPECT_EQ(untrusted.terminate(10s), 0) << untrusted.describe();
  }
  EXPECT_EQ(unpublished(), 5);
  EXPECT_EQ(upstream_total(consumer.port), 0u) << "nothing reaches an unverified consumer";

  settings_.http_tls = "{ ca_file: \"" + ca.cert.string() + "\" }";
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("trusted");
  ASSERT_TRUE(drained(20s)) << relay.describe();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  EXPECT_EQ(upstream_total(consumer.port), 5u);
  for (const std::int64_t id : ids)
    EXPECT_EQ(upstream_count_for_webhook_id(consumer.port, std::to_string(id)), 1u) << id;
  EXPECT_GE(upstream_tls_connections(consumer.port), 1u);
}

// 8c. A consumer that requires a client certificate: without one the refusal (TLS 1.3 sends it in
//     place of the first response) is an unusable endpoint, not a failed attempt: no row is
//     charged an attempt or parked. With the certificate configured, every event arrives once.
TEST_F(RelayProcess, HttpsSinkPresentsItsClientCertificate) {
  const auto [ca, server, client] = make_consumer_certificates(dir_->path());
  TestUpstream consumer =
      start_test_upstream_tls(dir_->path(), TestUpstreamTls{server.cert, server.key, ca.cert}, "hooks");
  const auto ids = schema_->insert("order", "mtls1", 3, "created");
  settings_.http = true;
  settings_.http_url = "https://127.0.0.1:" + std::to_string(consumer.tls_port) + "/hooks/{event_type}";
  settings_.max_attempts = 2;  // a refusal counted as an attempt would park the row within a second

  settings_.http_tls = "{ ca_file: \"" + ca.cert.string() + "\" }";
  {
    const RelayRunner runner(dir_->path(), settings_);
    Process anonymous = runner.start("anonymous");
    ASSERT_TRUE(eventually(
        [&] { return anonymous.stderr_text().find("rejected the TLS handshake") != std::string::npos; }, 10s))
        << anonymous.describe();
    std::this_thread::sleep_for(1500ms);  // several more rounds of backing off and trying again
    EXPECT_EQ(anonymous.terminate(10s), 0) << anonymous.describe();
  }
  EXPECT_EQ(unpublished(), 3);
  EXPECT_EQ(schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE attempts > 0 OR parked_at IS NOT NULL"), 0);
  EXPECT_EQ(upstream_total(consumer.port), 0u);

  settings_.http_tls = "{ ca_file: \"" + ca.cert.string() + "\", cert_file: \"" + client.cert.string() +
                       "\", key_file: \"" + client.key.string() + "\" }";
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("with-certificate");
  ASSERT_TRUE(drained(20s)) << relay.describe();
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
  for (const std::int64_t id : ids)
    EXPECT_EQ(upstream_count_for_webhook_id(consumer.port, std::to_string(id)), 1u) << id;
}

// 8b. A sink slow to make its first connection (Redis's answer to the set-up's SCRIPT LOAD held
//     300 ms) is waited for: the relay's first claims find it still connecting and look again,
//     without backing off or logging an outage, then everything drains in order.
TEST_F(RelayProcess, ASinkStillMakingItsFirstConnectionIsWaitedForNotBackedOffFrom) {
  for (const char* aggregate : {"s1", "s2"}) schema_->insert("order", aggregate, 10);
  FaultProxy redis("127.0.0.1", suite_redis_port());
  redis.delay_next_reply(contains_all({"SCRIPT", "LOAD"}), 300ms);
  settings_.redis_port = redis.port();
  const RelayRunner runner(dir_->path(), settings_);

  Process relay = runner.start("slow-sink");
  ASSERT_TRUE(drained(15s)) << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
  EXPECT_EQ(redis.faults_fired(), 1u) << "the set-up's answer was not held";
  EXPECT_EQ(relay.stderr_text().find("\"event\":\"backing_off\""), std::string::npos) << relay.describe();
  const auto entries = read_stream(*redis_, stream("order"));
  const StreamAudit result = audit(entries);
  EXPECT_EQ(entries.size(), 20u);
  for (const auto& [id, copies] : result.copies) ASSERT_EQ(copies, 1) << "event " << id;
  EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
}

// 9. A relay paused (SIGSTOP) past its lease while holding a published batch: another relay takes
//    over; when the paused one resumes, its settle is fenced off and it publishes nothing twice.
//    It is stopped while Redis's answer to its publish is held on the way: the batch is in the
//    stream, and the relay reads that it went through only when it resumes.
TEST_F(RelayProcess, PausedRelayResumingAfterItsLeaseChangesNothing) {
  for (const char* aggregate : {"p1", "p2", "p3"}) schema_->insert("order", aggregate, 10);
  settings_.batch_size = 100;
  const RelayRunner runner(dir_->path(), settings_);
  FaultProxy redis("127.0.0.1", suite_redis_port());
  hold_next_reply(redis, publish_script());
  RelaySettings through_proxy = settings_;
  through_proxy.redis_port = redis.port();
  const RelayRunner paused_runner(dir_->path(), through_proxy);

  Process paused = paused_runner.start("paused");
  ASSERT_TRUE(stop_while_reply_held(redis, paused, 10s)) << paused.describe();
  EXPECT_TRUE(eventually([&] { return read_stream(*redis_, stream("order")).size() == 30u; }, 5s));

  Process other = runner.start("other");
  ASSERT_TRUE(drained(15s)) << other.describe();  // after the paused relay's 3 s lease
  for (const char* aggregate : {"p1", "p2", "p3"}) schema_->insert("order", aggregate, 5);
  ASSERT_TRUE(drained(10s)) << other.describe();

  ASSERT_TRUE(paused.signal(SIGCONT));
  ASSERT_TRUE(
      eventually([&] { return paused.stderr_text().find("\"event\":\"lease_lost\"") != std::string::npos; }, 10s))
      << paused.describe();
  for (const char* aggregate : {"p1", "p2", "p3"}) schema_->insert("order", aggregate, 5);
  ASSERT_TRUE(drained(10s)) << paused.describe() << other.describe();
  EXPECT_EQ(paused.terminate(10s), 0) << paused.describe();
  EXPECT_EQ(other.terminate(10s), 0) << other.describe();

  const auto entries = read_stream(*redis_, stream("order"));
  const StreamAudit result = audit(entries);
  EXPECT_EQ(entries.size(), 60u);
  for (const auto& [id, copies] : result.copies) ASSERT_EQ(copies, 1) << "event " << id;
  EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  EXPECT_EQ(stopped_field(paused.stderr_text(), "lease_lost"), 30);
  EXPECT_EQ(stopped_field(other.stderr_text(), "duplicates"), 30) << "the take-over re-publish added nothing";
}

// 9b. Paused right after its claim: on resume the lease is (nearly) over, so it drops the batch
//     without publishing it late behind the relay that took over. It is stopped while the claim's
//     answer is held on the way: the rows are leased to it, and it reads them only when it resumes.
TEST_F(RelayProcess, PausedRelayResumingAfterClaimDoesNotPublishLate) {
  for (const char* aggregate : {"q1", "q2"}) schema_->insert("order", aggregate, 10);
  settings_.batch_size = 100;
  const RelayRunner runner(dir_->path(), settings_);
  FaultProxy postgres("127.0.0.1", suite_postgres_port());
  hold_next_reply(postgres, claim_statement());
  RelaySettings through_proxy = settings_;
  through_proxy.dsn = dsn_through(schema_->dsn(), postgres);
  const RelayRunner paused_runner(dir_->path(), through_proxy);

  Process paused = paused_runner.start("paused");
  ASSERT_TRUE(stop_while_reply_held(postgres, paused, 10s)) << paused.describe();
  EXPECT_EQ(read_stream(*redis_, stream("order")).size(), 0u);
  Process other = runner.start("other");
  ASSERT_TRUE(drained(15s)) << other.describe();
  ASSERT_TRUE(paused.signal(SIGCONT));
  ASSERT_TRUE(eventually(
      [&] { return paused.stderr_text().find("\"event\":\"lease_nearly_over\"") != std::string::npos; }, 10s))
      << paused.describe();
  EXPECT_EQ(paused.terminate(10s), 0) << paused.describe();
  EXPECT_EQ(other.terminate(10s), 0) << other.describe();
  const auto entries = read_stream(*redis_, stream("order"));
  const StreamAudit result = audit(entries);
  EXPECT_EQ(entries.size(), 20u);
  EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  EXPECT_EQ(stopped_field(other.stderr_text(), "duplicates"), 0) << "nothing was published before the take-over";
  EXPECT_EQ(stopped_field(paused.stderr_text(), "lease_lost"), 20);
}

// The relay's admin listener: probes, and /metrics in valid Prometheus text with the real
// published count after real traffic.
TEST_F(RelayProcess, AdminListenerServesProbesAndMetricsOfRealTraffic) {
  settings_.admin_port = free_port();
  schema_->insert("order", "m1", 7);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  ASSERT_TRUE(wait_for_port(settings_.admin_port, 5s)) << relay.describe();

  EXPECT_EQ(send(settings_.admin_port, HttpRequest::get("/healthz")).status, 200);
  EXPECT_EQ(send(settings_.admin_port, HttpRequest::get("/readyz")).status, 200) << relay.describe();
  // The rows are marked in Postgres a moment before the relay reads the settle's answer and counts
  // them: under load that moment can outlast the probes above.
  HttpResponse metrics;
  EXPECT_TRUE(eventually(
      [&] {
        metrics = send(settings_.admin_port, HttpRequest::get("/metrics"));
        return metrics.body.find("idemrelay_published_total 7\n") != std::string::npos;
      },
      5s))
      << metrics.body;
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("# TYPE idemrelay_lag_seconds gauge"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("idemrelay_dead_letters 0"), std::string::npos) << metrics.body;

  // promtool (Debian package prometheus, installed by tests/run.sh) must find nothing to report.
  const std::filesystem::path scrape = dir_->path() / "relay-metrics.txt";
  std::ofstream(scrape, std::ios::binary) << metrics.body;
  const std::string command = "promtool check metrics < '" + scrape.string() + "' > '" + scrape.string() + ".out' 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0);
  std::ifstream lint(scrape.string() + ".out");
  const std::string lint_text((std::istreambuf_iterator<char>(lint)), std::istreambuf_iterator<char>());
  EXPECT_EQ(lint_text, "") << lint_text;
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
}

}  // namespace
}  // namespace idem::test::relay
