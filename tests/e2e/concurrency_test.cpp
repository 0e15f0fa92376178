// Many clients at once: Postgres arbitrates duplicates so the upstream executes exactly once, and
// distinct keys do not serialize behind each other.
#include <gtest/gtest.h>

#include <latch>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "e2e/e2e_support.hpp"

namespace idem::test::e2e {
namespace {

using Concurrency = ProxyTest;

// Starts `clients` threads that wait on one latch, then each sends make_request(i) once.
template <class MakeRequest>
std::vector<HttpResponse> send_all_at_once(std::uint16_t port, int clients, MakeRequest make_request) {
  std::vector<HttpResponse> responses(static_cast<std::size_t>(clients));
  std::latch start(clients);
  std::vector<std::thread> threads;
  threads.reserve(responses.size());
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      const HttpRequest request = make_request(i);
      start.arrive_and_wait();
      responses[static_cast<std::size_t>(i)] = send(port, request, std::chrono::seconds(30));
    });
  }
  for (auto& thread : threads) thread.join();
  return responses;
}

// Rows "new key" + "in flight" + "completed" under a stampede: 100 identical POSTs at once ->
// the upstream executes once; every response is a 409 in-flight or a byte-identical copy of the
// one 200 (only the winner's copy lacks Idempotent-Replay).
TEST_F(Concurrency, HundredIdenticalPostsExecuteExactlyOnce) {
  constexpr int kClients = 100;
  const std::string key = unique_key("stampede");
  const auto responses = send_all_at_once(proxy().proxy_port(), kClients,
                                          [&](int) { return order(key).with("X-Test-Delay-Ms", "200"); });

  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_EQ(upstream_total(), 1u);
  int winners = 0;
  int replays = 0;
  int in_flight = 0;
  std::string winner_body;
  std::vector<const HttpResponse*> successes;
  for (const auto& response : responses) {
    ASSERT_TRUE(response.ok()) << response.error;
    if (response.status == 409) {
      expect_problem(response, 409, "request-in-flight");
      EXPECT_TRUE(response.has_header("Retry-After"));
      ++in_flight;
      continue;
    }
    ASSERT_EQ(response.status, 200) << describe(response);
    successes.push_back(&response);
    if (is_replay(response)) {
      ++replays;
    } else {
      ++winners;
      winner_body = response.body;
    }
  }
  EXPECT_EQ(winners, 1) << "exactly one client may see the original execution";
  for (const auto* success : successes) EXPECT_EQ(success->body, winner_body);
  EXPECT_EQ(winners + replays + in_flight, kClients);
  EXPECT_EQ(execution_of(*successes.front()), 1);
}

// After completion, a burst of retries all replay the same bytes.
TEST_F(Concurrency, BurstOfRetriesAfterCompletionAllReplay) {
  const std::string key = unique_key("burst");
  const auto first = send(order(key));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  const auto responses = send_all_at_once(proxy().proxy_port(), 50, [&](int) { return order(key); });
  for (const auto& response : responses) {
    ASSERT_TRUE(response.ok()) << response.error;
    EXPECT_TRUE(is_replay(response)) << describe(response);
    EXPECT_EQ(response.body, first.body);
  }
  EXPECT_EQ(upstream_count(key), 1u);
}

// Distinct keys are independent: 100 different keys at once -> 100 executions, each client gets
// the response of its own execution.
TEST_F(Concurrency, HundredDistinctKeysAllExecute) {
  constexpr int kClients = 100;
  std::vector<std::string> keys;
  for (int i = 0; i < kClients; ++i) keys.push_back(unique_key("distinct"));
  const auto responses = send_all_at_once(proxy().proxy_port(), kClients,
                                          [&](int i) { return order(keys[static_cast<std::size_t>(i)]).with("X-Test-Delay-Ms", "50"); });
  std::map<std::int64_t, int> executions;
  for (int i = 0; i < kClients; ++i) {
    const auto& response = responses[static_cast<std::size_t>(i)];
    ASSERT_TRUE(response.ok()) << response.error;
    ASSERT_EQ(response.status, 200) << describe(response);
    EXPECT_FALSE(response.has_header("Idempotent-Replay"));
    EXPECT_EQ(string_member(upstream_json(response), "key"), keys[static_cast<std::size_t>(i)]);
    ++executions[execution_of(response)];
  }
  EXPECT_EQ(executions.size(), static_cast<std::size_t>(kClients)) << "every response must be its own execution";
  EXPECT_EQ(upstream_total(), static_cast<std::uint64_t>(kClients));
}

}  // namespace
}  // namespace idem::test::e2e
