// Lost replies in idemrelay: a FaultProxy between the relay and Postgres, Redis or the HTTP
// consumer lets one chosen statement or command through, swallows its answer (the server did the
// work), then resets the connection or hangs it (the relay's own deadline fires). The promise under
// test is what a user relies on after any such loss, with no operator and no waiting for a lease:
// every event reaches the sink (Redis: exactly one stream entry each; HTTP: executed once behind
// the consumer's inbox, redelivered with the same webhook-id), each aggregate in order, no row left
// leased, unpublished or parked, no attempt charged for a loss that was not the row's fault, and no
// error-level log line for a situation that healed by itself.
//
// Requests are matched as relay_faults.hpp says; a webhook delivery by its webhook-id header.
//
// The lease is 15 s: a test that drains within a few seconds of the fault proves the relay healed
// the loss itself rather than waiting for the lease to lapse.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "relay/relay_env.hpp"
#include "relay/relay_faults.hpp"
#include "relay/relay_fixture.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/ports.hpp"
#include "support/proxy_fixture.hpp"
#include "support/random_hex.hpp"
#include "support/raw_upstream.hpp"
#include "support/redis_client.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;
using AfterLoss = FaultProxy::AfterLoss;

// What happens to the chosen request.
enum class Fault {
  reply_lost_reset,  // executed, answer swallowed, connection reset
  reply_lost_hang,   // executed, answer swallowed, connection silent: the relay's deadline fires
  dropped_reset,     // never reaches the server, connection reset: certainly not executed
  slow,              // executed, answered 2 s late (past query_timeout and command_timeout)
};

void arm(FaultProxy& proxy, FaultProxy::Matcher matches, Fault fault) {
  switch (fault) {
    case Fault::reply_lost_reset: proxy.lose_next_reply(std::move(matches), AfterLoss::reset); return;
    case Fault::reply_lost_hang: proxy.lose_next_reply(std::move(matches), AfterLoss::hang); return;
    case Fault::dropped_reset: proxy.drop_next_request(std::move(matches), AfterLoss::reset); return;
    case Fault::slow: proxy.delay_next_reply(std::move(matches), 2s); return;
  }
}

bool executed(Fault fault) { return fault != Fault::dropped_reset; }

// The log lines of `event` (JSON lines: "event":"<event>").
std::vector<std::string> lines_of(const std::string& log, const std::string& event) {
  std::vector<std::string> found;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\"event\":\"" + event + "\"") != std::string::npos) found.push_back(line);
  }
  return found;
}

std::vector<std::string> error_lines(const std::string& log) {
  std::vector<std::string> found;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\"level\":\"error\"") != std::string::npos) found.push_back(line);
  }
  return found;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

class RelayLostReply : public RelayFixture {
 protected:
  void SetUp() override {
    RelayFixture::SetUp();
    settings_.lease = "15s";
    settings_.batch_size = 100;  // one claim takes every row: the first claim is the one that matters
  }

  // Rows a user would worry about: still unpublished, still leased, parked.
  void expect_outbox_settled() {
    auto client = schema_->client();
    EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NULL"), 0);
    EXPECT_EQ(
        client.scalar_int("SELECT count(*) FROM outbox WHERE claimed_by IS NOT NULL OR claimed_until IS NOT NULL"), 0)
        << "no row left leased";
    EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL"), 0) << "no row parked";
  }
  std::int64_t rows_with_attempts() {
    return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE attempts > 0");
  }

  void expect_each_event_once_in_order(std::size_t expected) {
    const auto entries = read_stream(*redis_, stream("order"));
    const StreamAudit result = audit(entries);
    EXPECT_EQ(entries.size(), expected) << "XRANGE: one entry per event";
    EXPECT_EQ(result.copies.size(), expected);
    for (const auto& [id, copies] : result.copies) EXPECT_EQ(copies, 1) << "event " << id;
    EXPECT_TRUE(result.ordered_per_aggregate) << result.first_disorder;
  }

  void insert_rows() {
    for (const char* aggregate : {"a1", "a2", "a3"}) schema_->insert("order", aggregate, kRowsPerAggregate);
  }

  static constexpr int kRowsPerAggregate = 10;
  static constexpr int kRows = 3 * kRowsPerAggregate;

  // The claim's answer is lost (or the claim never arrives). The rows it leased go back at once
  // (sql::kReleaseClaim by its token), not when the 15 s lease lapses.
  void claim_fault(Fault fault) {
    insert_rows();
    // One worker: with two, a second claim racing the first may be the one the fault hits, and it
    // leases nothing (the first holds every row).
    settings_.concurrency = 1;
    FaultProxy postgres("127.0.0.1", suite_postgres_port());
    arm(postgres, claim_statement(), fault);
    settings_.dsn = dsn_through(schema_->dsn(), postgres);
    const RelayRunner runner(dir_->path(), settings_);
    Process relay = runner.start("relay");

    ASSERT_TRUE(postgres.wait_fired(1, 10s)) << relay.describe();
    ASSERT_TRUE(drained(6s)) << "the rows of the lost claim waited for its lease\n" << relay.describe();
    ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
    const std::string log = relay.stderr_text();

    const auto released = lines_of(log, "lost_claim_released");
    ASSERT_EQ(released.size(), 1u) << log;
    // Executed: the claim had leased every row; dropped: it never ran, so nothing to hand back.
    const std::string rows = executed(fault) ? std::to_string(kRows) : "0";
    EXPECT_NE(released[0].find("\"rows\":" + rows + "}"), std::string::npos) << released[0];
    expect_each_event_once_in_order(kRows);
    expect_outbox_settled();
    EXPECT_EQ(rows_with_attempts(), 0) << "a lost claim is not the rows' fault";
    EXPECT_EQ(stopped_field(log, "published"), kRows);
    EXPECT_EQ(stopped_field(log, "duplicates"), 0) << "nothing had been published before the loss";
    EXPECT_TRUE(error_lines(log).empty()) << joined(error_lines(log));
  }

  // The settle's answer is lost after it committed (or it never arrives). The retry, fenced by the
  // token, finds nothing left: that is the earlier settle having applied, not a lost lease.
  void settle_fault(Fault fault) {
    insert_rows();
    FaultProxy postgres("127.0.0.1", suite_postgres_port());
    arm(postgres, settle_statement(), fault);
    settings_.dsn = dsn_through(schema_->dsn(), postgres);
    const RelayRunner runner(dir_->path(), settings_);
    Process relay = runner.start("relay");

    ASSERT_TRUE(postgres.wait_fired(1, 10s)) << relay.describe();
    ASSERT_TRUE(drained(6s)) << relay.describe();
    if (executed(fault)) {
      // The rows were marked by the settle whose reply was lost: wait for the relay's retry to
      // come back (whatever it concludes).
      ASSERT_TRUE(eventually(
          [&] {
            const std::string log = relay.stderr_text();
            return !lines_of(log, "lost_settle_applied").empty() || !lines_of(log, "lease_lost").empty();
          },
          5s))
          << relay.describe();
    }
    ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
    const std::string log = relay.stderr_text();

    EXPECT_TRUE(lines_of(log, "lease_lost").empty()) << log;
    EXPECT_EQ(lines_of(log, "lost_settle_applied").size(), executed(fault) ? 1u : 0u) << log;
    EXPECT_EQ(stopped_field(log, "published"), kRows) << "the counters say what happened to the rows";
    EXPECT_EQ(stopped_field(log, "lease_lost"), 0);
    EXPECT_EQ(stopped_field(log, "duplicates"), 0) << "the settle's loss does not re-publish anything";
    expect_each_event_once_in_order(kRows);
    expect_outbox_settled();
    EXPECT_EQ(rows_with_attempts(), 0);
    EXPECT_TRUE(error_lines(log).empty()) << joined(error_lines(log));
  }

  // The EVALSHA's answer is lost after Redis ran the script (or it never arrives). The batch is
  // released unattempted; on the re-claim the dedup markers answer "duplicate" for what went in.
  void publish_fault(Fault fault) {
    insert_rows();
    FaultProxy redis("127.0.0.1", suite_redis_port());
    arm(redis, publish_script(), fault);
    settings_.redis_port = redis.port();
    const RelayRunner runner(dir_->path(), settings_);
    Process relay = runner.start("relay");

    ASSERT_TRUE(redis.wait_fired(1, 10s)) << relay.describe();
    ASSERT_TRUE(drained(8s)) << relay.describe();
    ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
    const std::string log = relay.stderr_text();

    expect_each_event_once_in_order(kRows);
    const std::int64_t duplicates = stopped_field(log, "duplicates");
    if (executed(fault)) {
      EXPECT_GE(duplicates, 1) << "the script ran before its answer was lost: the markers caught the re-publish";
    } else {
      EXPECT_EQ(duplicates, 0) << "nothing reached Redis";
    }
    EXPECT_EQ(stopped_field(log, "published"), kRows);
    expect_outbox_settled();
    EXPECT_EQ(rows_with_attempts(), 0) << "an unanswered publish is the sink's outage, not the row's failure";
    EXPECT_TRUE(error_lines(log).empty()) << joined(error_lines(log));
  }
};

TEST_F(RelayLostReply, ClaimReplyLostWithResetReleasesItsRowsAtOnce) { claim_fault(Fault::reply_lost_reset); }
TEST_F(RelayLostReply, ClaimReplyLostWithHangReleasesItsRowsAfterTheDeadline) { claim_fault(Fault::reply_lost_hang); }
TEST_F(RelayLostReply, ClaimDroppedBeforeTheServerReleasesNothingAndCarriesOn) { claim_fault(Fault::dropped_reset); }
TEST_F(RelayLostReply, ClaimReplySlowerThanTheDeadlineReleasesItsRowsAfterIt) { claim_fault(Fault::slow); }

TEST_F(RelayLostReply, SettleReplyLostWithResetCountsAsApplied) { settle_fault(Fault::reply_lost_reset); }
TEST_F(RelayLostReply, SettleReplyLostWithHangCountsAsApplied) { settle_fault(Fault::reply_lost_hang); }
TEST_F(RelayLostReply, SettleDroppedBeforeTheServerIsSimplyRetried) { settle_fault(Fault::dropped_reset); }
TEST_F(RelayLostReply, SettleReplySlowerThanTheDeadlineCountsAsApplied) { settle_fault(Fault::slow); }

TEST_F(RelayLostReply, RedisScriptReplyLostWithResetAddsNoSecondEntry) { publish_fault(Fault::reply_lost_reset); }
TEST_F(RelayLostReply, RedisScriptReplyLostWithHangAddsNoSecondEntry) { publish_fault(Fault::reply_lost_hang); }
TEST_F(RelayLostReply, RedisScriptDroppedBeforeTheServerIsPublishedOnce) { publish_fault(Fault::dropped_reset); }
TEST_F(RelayLostReply, RedisScriptReplySlowerThanTheDeadlineAddsNoSecondEntry) { publish_fault(Fault::slow); }

// HTTP: relay -> FaultProxy -> idemproxy (the consumer's inbox, route keyed on webhook-id) ->
// idem-test-upstream, which counts executions per webhook-id.
class RelayLostWebhookReply : public RelayLostReply {
 protected:
  void SetUp() override {
    RelayLostReply::SetUp();
    settings_.http = true;
    settings_.max_attempts = 20;  // a redelivery may meet the inbox's 409 a few times
  }

  // Event ids become webhook-ids in idemproxy's shared table: start far from other runs' ids.
  void restart_ids_far_away() {
    const std::string base = std::to_string(1'000'000'000LL + std::stoll(random_hex(8), nullptr, 16) % 1'000'000'000LL);
    schema_->client().query("ALTER TABLE outbox ALTER COLUMN id RESTART WITH " + base);
  }

  std::int64_t attempts_of(std::int64_t id) {
    return schema_->client().scalar_int("SELECT attempts FROM outbox WHERE id = $1", {std::to_string(id)});
  }

  // The delivery of the first row of aggregate h1 loses its response (or never arrives).
  void delivery_fault(Fault fault) {
    ProxyHarness consumer;
    consumer.start();
    restart_ids_far_away();
    const auto first = schema_->insert("order", "h1", 5, "created");
    const auto second = schema_->insert("order", "h2", 5, "created");
    const std::string target = std::to_string(first[0]);
    FaultProxy front("127.0.0.1", consumer.proxy_port());
    arm(front, contains_all({"webhook-id: " + target + "\r\n"}), fault);
    settings_.http_url = "http://127.0.0.1:" + std::to_string(front.port()) + "/webhooks/{event_type}";
    const RelayRunner runner(dir_->path(), settings_);
    Process relay = runner.start("relay");

    ASSERT_TRUE(front.wait_fired(1, 10s)) << relay.describe() << consumer.diagnostics();
    ASSERT_TRUE(drained(8s)) << relay.describe() << consumer.diagnostics();
    ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
    const std::string log = relay.stderr_text();

    // The consumer executed each event once: the redelivery carried the same webhook-id, and the
    // inbox answered it from its record.
    EXPECT_EQ(consumer.upstream_total(), 10u) << consumer.diagnostics();
    for (const auto* ids : {&first, &second}) {
      for (const std::int64_t id : *ids) EXPECT_EQ(consumer.upstream_webhook_count(std::to_string(id)), 1u) << id;
    }
    // The lost delivery was retried (an attempt: the consumer may have seen it), nothing else was.
    const auto retried = lines_of(log, "publish_failed");
    ASSERT_FALSE(retried.empty()) << log;
    for (const std::string& line : retried)
      EXPECT_NE(line.find("\"event_id\":" + target + ","), std::string::npos) << line;
    EXPECT_GE(attempts_of(first[0]), 1);
    EXPECT_EQ(rows_with_attempts(), 1) << "only the row whose delivery failed was charged";
    EXPECT_EQ(stopped_field(log, "published"), 10);
    expect_outbox_settled();
    EXPECT_TRUE(error_lines(log).empty()) << joined(error_lines(log));
  }
};

TEST_F(RelayLostWebhookReply, ResponseLostWithResetIsRedeliveredAndExecutedOnce) {
  delivery_fault(Fault::reply_lost_reset);
}
TEST_F(RelayLostWebhookReply, ResponseLostWithHangIsRedeliveredAndExecutedOnce) {
  delivery_fault(Fault::reply_lost_hang);
}
TEST_F(RelayLostWebhookReply, RequestDroppedBeforeTheConsumerIsRedeliveredAndExecutedOnce) {
  delivery_fault(Fault::dropped_reset);
}

// A consumer slower than the relay's timeout (1.2 s against 500 ms): the relay gives up on the
// response and redelivers while the inbox still runs the first delivery, so the inbox answers
// 409 until it is done, then replays the stored response. A 409 is retried, never parked, and the
// event executes once.
TEST_F(RelayLostWebhookReply, SlowConsumerAnsweringConflictIsRetriedNotParked) {
  const std::uint16_t upstream_port = free_port();
  FaultProxy slow_upstream("127.0.0.1", upstream_port);
  slow_upstream.set_reply_delay(1200ms);
  ProxyOptions options;
  options.start_upstream = false;
  options.upstream_port = upstream_port;
  options.variables["UPSTREAM_PORT"] = std::to_string(slow_upstream.port());
  ProxyHarness consumer(options);
  consumer.start();
  consumer.start_upstream_now();
  restart_ids_far_away();
  const auto ids = schema_->insert("order", "s1", 2, "created");
  settings_.http_url = "http://127.0.0.1:" + std::to_string(consumer.proxy_port()) + "/webhooks/{event_type}";
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");

  ASSERT_TRUE(drained(12s)) << relay.describe() << consumer.diagnostics();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
  const std::string log = relay.stderr_text();

  EXPECT_FALSE(lines_of(log, "publish_failed").empty()) << log;
  EXPECT_NE(log.find("HTTP 409"), std::string::npos) << "the redelivery met the inbox's in-flight answer\n" << log;
  for (const std::int64_t id : ids) EXPECT_EQ(consumer.upstream_webhook_count(std::to_string(id)), 1u) << id;
  EXPECT_EQ(consumer.upstream_total(), 2u);
  EXPECT_EQ(stopped_field(log, "published"), 2);
  EXPECT_EQ(stopped_field(log, "parked"), 0);
  expect_outbox_settled();
  EXPECT_TRUE(error_lines(log).empty()) << joined(error_lines(log));
}

// The webhook sink reads responses as strictly as the proxy does: an answer whose framing cannot
// be trusted (two framings, two lengths) is never taken as a delivery. The consumer may have run
// it, so it is one attempt charged and a redelivery with the same webhook-id; the aggregate's
// later rows wait for it (order kept), and nothing is parked. A 204 that claims a length has no
// body: the bytes after it never become the answer to the next delivery.
TEST_F(RelayLostWebhookReply, AnAnswerWithUntrustworthyFramingIsNotADeliveryAndIsRedelivered) {
  RawUpstream consumer;
  const std::string target = "/webhooks/created";  // /webhooks/{event_type}
  consumer.script_next(target,
                       {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true});
  consumer.script_next(target, {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", true});
  consumer.script_next(
      target,
      {"HTTP/1.1 204 No Content\r\nContent-Length: 40\r\n\r\nHTTP/1.1 500 Internal\r\nContent-Length: 0\r\n\r\n",
       false});
  const auto ids = schema_->insert("order", "f1", 4, "created");
  settings_.concurrency = 1;
  settings_.http_url = "http://127.0.0.1:" + std::to_string(consumer.port()) + "/webhooks/{event_type}";
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();

  // Deliveries in the order the consumer received them: the first row three times (two refused
  // answers, then the 204), then each later row once.
  std::vector<std::string> delivered;
  const std::string received = consumer.received();
  const std::string marker = "webhook-id: ";
  for (std::size_t at = received.find(marker); at != std::string::npos; at = received.find(marker, at + 1)) {
    const std::size_t value = at + marker.size();
    delivered.push_back(received.substr(value, received.find("\r\n", value) - value));
  }
  std::vector<std::string> expected(3, std::to_string(ids[0]));
  for (std::size_t i = 1; i < ids.size(); ++i) expected.push_back(std::to_string(ids[i]));
  EXPECT_EQ(delivered, expected) << relay.describe();
  EXPECT_EQ(attempts_of(ids[0]), 2) << "each refused answer is one attempt charged";
  EXPECT_EQ(rows_with_attempts(), 1);
  expect_outbox_settled();
}

}  // namespace
}  // namespace idem::test::relay
