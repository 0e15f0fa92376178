// A stale settle from a real relay racing a real relay's claim, end to end (the statements alone:
// claim_test.cpp). Relay A is paused (SIGSTOP) while the consumer's answer to its last delivery is
// held by a fault proxy, and resumes past its lease; meanwhile another batch (played by the test)
// took the lane and the first rows and handed the lane back. A's settle then runs while relay B
// claims. The test holds one row's lock, so A's settle waits mid-statement, and lets it go once B
// has claimed (or is waiting for A). Before the fix, B re-took the rows A's settle had just
// published or parked and delivered them again. Each webhook-id must reach the consumer at most
// once, and the parked row must stay parked with the rows behind it.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <csignal>
#include <functional>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "relay/outbox_source.hpp"
#include "relay/relay_env.hpp"
#include "relay/relay_faults.hpp"
#include "relay/relay_fixture.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/raw_upstream.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;
using idem::relay::OutboxRow;
using idem::relay::OutboxSource;
using idem::relay::RowSettlement;
using idem::relay::Settlement;

// How many times each webhook-id reached the consumer.
std::map<std::string, int> deliveries(const RawUpstream& consumer) {
  std::map<std::string, int> count;
  const std::string received = consumer.received();
  const std::string marker = "webhook-id: ";
  for (std::size_t at = received.find(marker); at != std::string::npos; at = received.find(marker, at + 1)) {
    const std::size_t value = at + marker.size();
    ++count[received.substr(value, received.find("\r\n", value) - value)];
  }
  return count;
}

std::int64_t claims_total(std::uint16_t admin_port) {
  const HttpResponse metrics = send(admin_port, HttpRequest::get("/metrics"));
  std::smatch match;
  if (!std::regex_search(metrics.body, match, std::regex(R"(idemrelay_claims_total (\d+))"))) return -1;
  return std::stoll(match[1]);
}

class RelayStaleSettle : public RelayFixture {
 protected:
  // The test's own claim and settle: the batch that took the lane while A was paused.
  std::vector<OutboxRow> claim(OutboxSource& source, std::size_t limit, const std::string& token) {
    std::vector<OutboxRow> rows;
    bool done = false;
    source.claim(limit, token, 10s, [&](pg::PgError error, std::vector<OutboxRow> claimed) {
      EXPECT_TRUE(error.ok()) << error.message;
      rows = std::move(claimed);
      done = true;
    });
    run_until([&] { return done; });
    return rows;
  }
  std::size_t publish(OutboxSource& source, const std::string& token, const std::vector<OutboxRow>& rows) {
    std::vector<RowSettlement> settlements;
    for (const OutboxRow& row : rows)
      settlements.push_back(
          {.id = row.id, .lane = row.lane, .outcome = Settlement::published, .delay = {}, .error = {}});
    std::size_t updated = 0;
    bool done = false;
    source.settle(token, settlements, [&](pg::PgError error, std::size_t rows_updated) {
      EXPECT_TRUE(error.ok()) << error.message;
      updated = rows_updated;
      done = true;
    });
    run_until([&] { return done; });
    return updated;
  }
  void run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(5ms);
      if (io_.stopped()) io_.restart();
    }
    ASSERT_TRUE(done()) << "timed out";
  }

  boost::asio::io_context io_;
};

TEST_F(RelayStaleSettle, AResumedRelaysSettleRacingAnotherRelaysClaimDeliversNothingTwice) {
  // One aggregate: rows 1-5 and 7-10 are answered 200, row 6 (event type "refused") 422: parked.
  auto ids = schema_->insert("order", "s1", 5, "created");
  const std::int64_t refused = schema_->insert("order", "s1", 1, "refused").at(0);
  ids.push_back(refused);
  for (const std::int64_t id : schema_->insert("order", "s1", 4, "created")) ids.push_back(id);
  RawUpstream consumer;
  consumer.script("/hooks/refused", {"HTTP/1.1 422 Unprocessable\r\nContent-Length: 0\r\n\r\n", false});
  FaultProxy front("127.0.0.1", consumer.port());
  settings_.http = true;
  settings_.http_url = "http://127.0.0.1:" + std::to_string(front.port()) + "/hooks/{event_type}";
  settings_.concurrency = 1;
  settings_.batch_size = 100;
  // A settle blocked on the test's lock must outlive the race: statement_timeout 2.7 s.
  settings_.query_timeout = "3s";
  settings_.lease = "7s";
  const RelayRunner runner_a(dir_->path(), settings_);
  settings_.admin_port = free_port();
  const RelayRunner runner_b(dir_->path(), settings_);

  // A delivers rows 1-5 and is stopped while the consumer's 422 for row 6 is on its way back.
  hold_next_reply(front, contains_all({"webhook-id: " + std::to_string(refused) + "\r\n"}));
  Process a = runner_a.start("a");
  ASSERT_TRUE(stop_while_reply_held(front, a, 10s)) << a.describe();
  std::this_thread::sleep_for(7500ms);  // A's lease lapses

  // Another batch takes the lane and rows 1-4, publishes them and hands the lane back.
  pg::PoolOptions pool;
  pool.dsn = schema_->dsn();
  pool.size = 2;
  OutboxSource source(io_, pool);
  source.start();
  const std::vector<OutboxRow> taken = claim(source, 4, "taker");
  ASSERT_EQ(taken.size(), 4u);
  ASSERT_EQ(publish(source, "taker", taken), 4u);
  source.stop();

  auto client = schema_->client();
  BlockingPg locker(schema_->dsn());
  const std::string locker_pid = std::to_string(locker.scalar_int("SELECT pg_backend_pid()"));
  locker.execute("BEGIN");
  locker.query("SELECT id FROM outbox WHERE id = $1 FOR UPDATE", {std::to_string(ids.back())});
  const auto blocked_by = [&](const std::string& pid) {
    return client.scalar_int("SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))",
                             {pid}) > 0;
  };

  // A resumes: row 6 refused, 7-10 held behind it; its settle (5 published, 6 parked, 7-10
  // released) waits on the test's lock.
  ASSERT_TRUE(a.signal(SIGCONT));
  ASSERT_TRUE(eventually([&] { return blocked_by(locker_pid); }, 5s)) << a.describe();
  const std::string settle_pid = std::to_string(
      client.scalar_int("SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", {locker_pid}));

  // B claims while A's settle is under way: it has claimed (and found nothing), or waits for A.
  Process b = runner_b.start("b");
  ASSERT_TRUE(wait_for_port(settings_.admin_port, 5s)) << b.describe();
  ASSERT_TRUE(eventually([&] { return claims_total(settings_.admin_port) >= 1 || blocked_by(settle_pid); }, 2s))
      << b.describe();
  locker.execute("ROLLBACK");

  // Whatever B's claim took has gone through B's hands (its next claims follow its settle).
  ASSERT_TRUE(eventually([&] { return !blocked_by(settle_pid) && claims_total(settings_.admin_port) >= 3; }, 10s))
      << b.describe();
  ASSERT_EQ(a.terminate(10s), 0) << a.describe();
  ASSERT_EQ(b.terminate(10s), 0) << b.describe();

  const auto received = deliveries(consumer);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto it = received.find(std::to_string(ids[i]));
    const int copies = it == received.end() ? 0 : it->second;
    EXPECT_EQ(copies, i < 6 ? 1 : 0) << "row " << i + 1 << " (event " << ids[i] << ")\n" << b.describe();
  }
  EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL"), 5);
  EXPECT_EQ(client.scalar_int("SELECT attempts FROM outbox WHERE id = $1 AND parked_at IS NOT NULL",
                              {std::to_string(refused)}),
            1)
      << "row 6 parked once, and stays parked";
  EXPECT_EQ(client.scalar_int("SELECT count(*) FROM outbox WHERE claimed_by IS NOT NULL"), 0) << "nothing leased";
  EXPECT_EQ(stopped_field(b.stderr_text(), "published"), 0) << b.describe();
  EXPECT_EQ(stopped_field(b.stderr_text(), "lease_lost"), 0) << b.describe();
}

}  // namespace
}  // namespace idem::test::relay
