// Webhooks over kept-alive connections: a consumer that never failed is never charged for the
// relay's own connections. idemrelay -> FaultProxy (counts the connections, and drops them where a
// test says) -> idem-test-upstream (a keep-alive HTTP server that counts executions per
// webhook-id and never closes an idle connection itself).
//
// sink.http.timeout is 500 ms (RelaySettings::command_timeout); every quiet period below is longer.
// A charge shows as `attempts` above 0, a `publish_failed` line and the exit line's
// `publish_failures`: each test asserts all three are nil.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "relay/relay_env.hpp"
#include "relay/relay_fixture.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/upstream_process.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

constexpr auto kQuietPeriod = 1200ms;  // sink.http.timeout is 500 ms

std::vector<std::string> lines_of(const std::string& log, const std::string& event) {
  std::vector<std::string> found;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("\"event\":\"" + event + "\"") != std::string::npos) found.push_back(line);
  }
  return found;
}

class RelayWebhookKeepAlive : public RelayFixture {
 protected:
  void SetUp() override {
    RelayFixture::SetUp();
    consumer_ = std::make_unique<TestUpstream>(start_test_upstream(dir_->path(), 0, "consumer"));
    front_ = std::make_unique<FaultProxy>("127.0.0.1", consumer_->port);
    settings_.http = true;
    settings_.http_url = "http://127.0.0.1:" + std::to_string(front_->port()) + "/hooks/{event_type}";
    settings_.batch_size = 100;
  }

  std::int64_t charged_rows() { return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE attempts > 0"); }
  // Milliseconds from the row's commit to its mark: how long it waited for the relay.
  std::int64_t wait_ms(std::int64_t id) {
    return schema_->client().scalar_int(
        "SELECT (extract(epoch FROM published_at - created_at) * 1000)::int8 FROM outbox WHERE id = $1",
        {std::to_string(id)});
  }
  std::uint64_t executions(std::int64_t id) {
    return upstream_count_for_webhook_id(consumer_->port, std::to_string(id));
  }

  // Nothing was charged: no attempt on any row, no publish_failed line, no failure counted.
  void expect_nothing_charged(Process& relay) {
    ASSERT_EQ(relay.terminate(10s), 0) << relay.describe();
    const std::string log = relay.stderr_text();
    EXPECT_EQ(charged_rows(), 0) << log;
    EXPECT_TRUE(lines_of(log, "publish_failed").empty()) << log;
    EXPECT_EQ(stopped_field(log, "publish_failures"), 0) << log;
    EXPECT_EQ(stopped_field(log, "parked"), 0) << log;
  }

  // 40 one-row aggregates committed together: a claim takes them in one batch (up to 16 lanes'
  // worth), which the sink sends over several connections at once (up to max_connections, 8) and
  // keeps. Returns the connections the burst left open.
  std::size_t burst() {
    const std::vector<PgRow> rows = schema_->client().query(
        "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, headers) "
        "SELECT 'burst', 'b' || g, 'happened', '{}', '{}' FROM generate_series(1, 40) AS g RETURNING id");
    EXPECT_TRUE(drained(10s));
    for (const PgRow& row : rows) EXPECT_EQ(executions(std::stoll(*row[0])), 1u) << *row[0];
    return front_->open_connections();
  }

  std::unique_ptr<TestUpstream> consumer_;
  std::unique_ptr<FaultProxy> front_;
};

// Deliveries separated by quiet periods longer than sink.http.timeout: each goes out on the one
// kept connection, none is charged.
TEST_F(RelayWebhookKeepAlive, ConsumerIdlePastTheTimeoutBetweenDeliveriesIsNeverCharged) {
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  std::vector<std::int64_t> ids;
  for (int round = 0; round < 4; ++round) {
    if (round > 0) std::this_thread::sleep_for(kQuietPeriod);
    const auto rows = schema_->insert("order", "quiet" + std::to_string(round), 2);
    ids.insert(ids.end(), rows.begin(), rows.end());
    ASSERT_TRUE(drained(5s)) << relay.describe();
  }
  for (const std::int64_t id : ids) EXPECT_EQ(executions(id), 1u) << id;
  EXPECT_EQ(front_->connections_accepted(), 1u) << "every round on the connection kept from the first";
  expect_nothing_charged(relay);
}

// After a burst that pooled several connections and a quiet period longer than the timeout, one
// row goes out at once on a kept connection, uncharged.
TEST_F(RelayWebhookKeepAlive, BurstThenQuietPeriodThenOneRowIsDeliveredAtOnceUncharged) {
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_GE(burst(), 2u) << "the burst pooled several connections\n" << relay.describe();
  const std::size_t connections = front_->connections_accepted();
  std::this_thread::sleep_for(kQuietPeriod);

  const std::int64_t id = schema_->insert("order", "after-quiet", 1).at(0);
  ASSERT_TRUE(drained(5s)) << relay.describe();
  EXPECT_LT(wait_ms(id), 1000) << "delivered at once (NOTIFY), not after a backoff";
  EXPECT_EQ(executions(id), 1u);
  EXPECT_EQ(front_->connections_accepted(), connections) << "it went out on a kept connection";
  expect_nothing_charged(relay);
}

// The consumer (or a load balancer before it) drops every idle connection: the next row is
// delivered at once on a fresh connection, uncharged, however many dead ones were pooled.
TEST_F(RelayWebhookKeepAlive, PooledConnectionsTheConsumerDroppedAreReplacedUncharged) {
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_GE(burst(), 2u) << "the burst pooled several connections\n" << relay.describe();
  front_->reset_all();
  ASSERT_TRUE(eventually([&] { return front_->open_connections() == 0; }, 2s));
  const std::size_t connections = front_->connections_accepted();

  const std::int64_t id = schema_->insert("order", "after-drop", 1).at(0);
  ASSERT_TRUE(drained(5s)) << relay.describe();
  EXPECT_LT(wait_ms(id), 1000) << "delivered at once, not after a backoff";
  EXPECT_EQ(executions(id), 1u);
  EXPECT_EQ(front_->connections_accepted(), connections + 1) << "one fresh connection";
  expect_nothing_charged(relay);
}

// A kept connection that dies under the request, before any response byte (the consumer closing it
// just as the relay writes; here the request is dropped and the connection reset): the event goes
// out again at once on a fresh connection, uncharged. It never reached the consumer: once in all.
TEST_F(RelayWebhookKeepAlive, AKeptConnectionDyingUnderTheRequestIsResentAtOnceOnAFreshOne) {
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  const std::int64_t first = schema_->insert("order", "first", 1).at(0);
  ASSERT_TRUE(drained(5s)) << relay.describe();
  ASSERT_EQ(front_->connections_accepted(), 1u);

  front_->drop_next_request(contains_all({"\"aggregate_id\":\"dies-under\""}), FaultProxy::AfterLoss::reset);
  const std::int64_t id = schema_->insert("order", "dies-under", 1).at(0);
  ASSERT_TRUE(front_->wait_fired(1, 5s)) << relay.describe();
  ASSERT_TRUE(drained(5s)) << relay.describe();
  EXPECT_LT(wait_ms(id), 1000) << "re-sent at once, not after a backoff";
  EXPECT_EQ(executions(first), 1u);
  EXPECT_EQ(executions(id), 1u);
  EXPECT_EQ(front_->connections_accepted(), 2u) << "the kept connection, then a fresh one";
  expect_nothing_charged(relay);
}

}  // namespace
}  // namespace idem::test::relay
