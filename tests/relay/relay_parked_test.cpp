// Parked rows without SQL: `idemrelay --list-parked`, GET /admin/parked, the held-behind gauge and
// `--redrive --aggregate`, with the real binary, the suite's Postgres and Redis.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "relay/relay_env.hpp"
#include "relay/relay_fixture.hpp"
#include "support/eventually.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

class RelayParked : public RelayFixture {};

boost::json::object parse_object(const std::string& text) {
  boost::system::error_code error;
  const boost::json::value value = boost::json::parse(text, error);
  if (error || !value.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << text;
    return {};
  }
  return value.as_object();
}

const boost::json::array& parked_rows(const boost::json::object& list) { return list.at("parked").as_array(); }

// The value of `name` in a Prometheus scrape (first sample), or -1.
double sample(const std::string& scrape, const std::string& name) {
  const std::size_t at = scrape.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(scrape.substr(at + name.size() + 2));
}

// Two aggregates of one type the sink refuses (their stream key holds a string: WRONGTYPE) park
// after max_attempts with their later rows held; another type flows. The operator sees both parked
// rows, why, and what waits behind each, from the command line and the admin listener; the gauge
// counts the held rows; redriving one aggregate releases it alone, in order.
TEST_F(RelayParked, ParkedRowsAreListedWithWhatWaitsBehindAndRedrivenByAggregate) {
  settings_.max_attempts = 2;
  settings_.admin_port = free_port();
  settings_.admin_token = "parked-test-token";
  redis_->command({"SET", stream("blocked"), "not a stream"});
  const auto first = schema_->insert("blocked", "b1", 4);
  const auto second = schema_->insert("blocked", "b/2", 2);  // an id with a '/': split at the first
  schema_->insert("order", "o1", 5);
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  ASSERT_TRUE(eventually(
      [&] { return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL") == 2; },
      15s))
      << relay.describe();

  const RunResult listed = runner.run({"--list-parked"});
  ASSERT_EQ(listed.exit_status, 0) << listed.stderr_text;
  const boost::json::object all = parse_object(listed.stdout_text);
  EXPECT_EQ(all.at("total").as_int64(), 2) << listed.stdout_text;
  EXPECT_EQ(all.at("truncated").as_bool(), false);
  ASSERT_EQ(parked_rows(all).size(), 2u) << listed.stdout_text;
  const boost::json::object& head = parked_rows(all)[0].as_object();
  EXPECT_EQ(head.at("id").as_int64(), first[0]);
  EXPECT_EQ(head.at("aggregate_type").as_string(), "blocked");
  EXPECT_EQ(head.at("aggregate_id").as_string(), "b1");
  EXPECT_EQ(head.at("event_type").as_string(), "happened");
  EXPECT_EQ(head.at("attempts").as_int64(), 2);
  EXPECT_EQ(head.at("held_behind").as_int64(), 3);
  EXPECT_NE(std::string(head.at("last_error").as_string()).find("WRONGTYPE"), std::string::npos) << listed.stdout_text;
  EXPECT_EQ(head.at("parked_at").as_string().size(), 27u) << "RFC 3339 UTC with microseconds";
  const boost::json::object& other = parked_rows(all)[1].as_object();
  EXPECT_EQ(other.at("id").as_int64(), second[0]);
  EXPECT_EQ(other.at("aggregate_id").as_string(), "b/2");
  EXPECT_EQ(other.at("held_behind").as_int64(), 1);

  const RunResult limited = runner.run({"--list-parked", "--limit", "1"});
  ASSERT_EQ(limited.exit_status, 0) << limited.stderr_text;
  const boost::json::object one = parse_object(limited.stdout_text);
  EXPECT_EQ(one.at("total").as_int64(), 2);
  EXPECT_EQ(one.at("limit").as_int64(), 1);
  EXPECT_EQ(one.at("truncated").as_bool(), true);
  EXPECT_EQ(parked_rows(one).size(), 1u);

  const RunResult of_aggregate = runner.run({"--list-parked", "--aggregate", "blocked/b/2"});
  ASSERT_EQ(of_aggregate.exit_status, 0) << of_aggregate.stderr_text;
  const boost::json::object just_b2 = parse_object(of_aggregate.stdout_text);
  EXPECT_EQ(just_b2.at("total").as_int64(), 1);
  ASSERT_EQ(parked_rows(just_b2).size(), 1u);
  EXPECT_EQ(parked_rows(just_b2)[0].as_object().at("id").as_int64(), second[0]);

  const RunResult bad_limit = runner.run({"--list-parked", "--limit", "1001"});
  EXPECT_EQ(bad_limit.exit_status, 2);
  EXPECT_NE(bad_limit.stderr_text.find("--limit takes a number from 1 to 1000"), std::string::npos)
      << bad_limit.stderr_text;

  // The admin listener answers the same document, behind the bearer token.
  ASSERT_TRUE(wait_for_port(settings_.admin_port, 5s)) << relay.describe();
  EXPECT_EQ(send(settings_.admin_port, HttpRequest::get("/admin/parked")).status, 401);
  const auto authorized = [&](const std::string& target) {
    return send(settings_.admin_port, HttpRequest::get(target).with("Authorization", "Bearer parked-test-token"));
  };
  const HttpResponse served = authorized("/admin/parked");
  ASSERT_EQ(served.status, 200) << served.body;
  EXPECT_EQ(served.headers.find("Content-Type")->second, "application/json");
  EXPECT_EQ(served.body, listed.stdout_text);
  const HttpResponse served_b2 = authorized("/admin/parked?aggregate=blocked%2Fb%2F2&limit=5");
  ASSERT_EQ(served_b2.status, 200) << served_b2.body;
  EXPECT_EQ(parse_object(served_b2.body).at("total").as_int64(), 1) << served_b2.body;
  const HttpResponse bad = authorized("/admin/parked?aggregate=nothing-to-split");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.headers.find("Content-Type")->second, "application/problem+json");
  EXPECT_NE(bad.body.find("aggregate takes TYPE/ID"), std::string::npos) << bad.body;

  // The gauge: 3 rows behind b1's head, 1 behind b/2's.
  std::string scrape;
  ASSERT_TRUE(eventually(
      [&] {
        scrape = authorized("/metrics").body;
        return sample(scrape, "idemrelay_held_behind_parked_rows") == 4;
      },
      5s))
      << scrape;
  EXPECT_NE(scrape.find("# TYPE idemrelay_held_behind_parked_rows gauge"), std::string::npos);
  const std::filesystem::path scrape_file = dir_->path() / "relay-metrics.txt";
  std::ofstream(scrape_file, std::ios::binary) << scrape;
  const std::string promtool =
      "promtool check metrics < '" + scrape_file.string() + "' > '" + scrape_file.string() + ".out' 2>&1";
  EXPECT_EQ(std::system(promtool.c_str()), 0);
  std::ifstream lint(scrape_file.string() + ".out");
  const std::string lint_text((std::istreambuf_iterator<char>(lint)), std::istreambuf_iterator<char>());
  EXPECT_EQ(lint_text, "") << lint_text;

  // Redrive b1 alone: its four rows reach the stream in order; b/2 stays parked, its row held.
  redis_->command({"DEL", stream("blocked")});
  const RunResult redriven = runner.run({"--redrive", "--aggregate", "blocked/b1"});
  ASSERT_EQ(redriven.exit_status, 0) << redriven.stderr_text;
  EXPECT_EQ(redriven.stdout_text, "redriven 1 row(s) " + std::to_string(first[0]) + "\n");
  ASSERT_TRUE(eventually([&] { return read_stream(*redis_, stream("blocked")).size() == 4; }, 10s)) << relay.describe();
  std::this_thread::sleep_for(500ms);
  const auto entries = read_stream(*redis_, stream("blocked"));
  ASSERT_EQ(entries.size(), 4u) << "b/2 is still parked";
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(entries[i].event_id(), first[i]);
  const boost::json::object left = parse_object(authorized("/admin/parked").body);
  EXPECT_EQ(left.at("total").as_int64(), 1);
  ASSERT_TRUE(
      eventually([&] { return sample(authorized("/metrics").body, "idemrelay_held_behind_parked_rows") == 1; }, 5s));

  const RunResult nothing = runner.run({"--redrive", "--aggregate", "blocked/b1"});
  EXPECT_EQ(nothing.exit_status, 1);
  EXPECT_NE(nothing.stderr_text.find("aggregate blocked/b1 has no parked row"), std::string::npos)
      << nothing.stderr_text;
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
}

}  // namespace
}  // namespace idem::test::relay
