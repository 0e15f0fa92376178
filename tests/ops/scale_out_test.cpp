// Scale-out: two proxy processes share one database (and one upstream) and receive the same keys
// at the same time. Postgres arbitrates: exactly one execution per key, and every other answer is
// that execution's stored response or a 409 while it runs.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"

namespace idem::test::ops {
namespace {

using e2e::order;

constexpr int kKeys = 50;
constexpr int kRequestsPerKey = 10;  // half to each proxy
constexpr int kClientThreads = 100;  // ten keys raced at a time, all ten requests of a key together
constexpr int kUpstreamDelayMs = 100;

struct Outcome {
  int proxy = 0;
  HttpResponse response;
};

TEST(OpsScaleOut, TwoProxiesOneDatabaseExecuteEachKeyOnce) {
  ProxyHarness first;
  first.start();
  ProxyOptions second_options;
  second_options.start_upstream = false;
  second_options.upstream_port = first.upstream_port();  // the same service behind both sidecars
  ProxyHarness second(second_options);
  second.start();
  const std::vector<std::uint16_t> ports{first.proxy_port(), second.proxy_port()};

  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(unique_key("scale-out"));
  // Jobs ordered key by key: the threads pick up a key's ten requests together.
  std::vector<std::pair<int, int>> jobs;  // (key index, proxy index)
  for (int k = 0; k < kKeys; ++k) {
    for (int r = 0; r < kRequestsPerKey; ++r) jobs.emplace_back(k, r % 2);
  }
  std::atomic<std::size_t> next{0};
  std::mutex results_mutex;
  std::map<int, std::vector<Outcome>> results;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClientThreads; ++t) {
    clients.emplace_back([&] {
      for (std::size_t job = next.fetch_add(1); job < jobs.size(); job = next.fetch_add(1)) {
        const auto [k, p] = jobs[job];
        HttpResponse response = send(ports[static_cast<std::size_t>(p)],
                                     order(keys[static_cast<std::size_t>(k)])
                                         .with("X-Test-Delay-Ms", std::to_string(kUpstreamDelayMs)));
        std::lock_guard lock(results_mutex);
        results[k].push_back(Outcome{p, std::move(response)});
      }
    });
  }
  for (auto& client : clients) client.join();

  int conflicts = 0;
  for (int k = 0; k < kKeys; ++k) {
    const std::string& key = keys[static_cast<std::size_t>(k)];
    EXPECT_EQ(first.upstream_count(key), 1u) << key;
    const auto& outcomes = results[k];
    ASSERT_EQ(outcomes.size(), static_cast<std::size_t>(kRequestsPerKey));
    int executed = 0;
    std::int64_t winner = 0;
    for (const auto& outcome : outcomes) {
      const HttpResponse& response = outcome.response;
      ASSERT_TRUE(response.ok()) << response.error;
      if (response.status == 409) {
        e2e::expect_problem(response, 409, "request-in-flight");
        ++conflicts;
        continue;
      }
      ASSERT_EQ(response.status, 200) << "proxy " << outcome.proxy << ": " << describe(response);
      executed += !e2e::is_replay(response);
      const std::int64_t execution = e2e::execution_of(response);
      EXPECT_GT(execution, 0) << describe(response);
      if (winner == 0) winner = execution;
      EXPECT_EQ(execution, winner) << key << ": a 200 that is not the one execution's response";
    }
    EXPECT_EQ(executed, 1) << key << ": responses that claim to be the first execution";
  }

  // Afterwards both proxies replay the one stored response.
  for (int k = 0; k < kKeys; k += 5) {
    const std::string& key = keys[static_cast<std::size_t>(k)];
    const HttpResponse a = send(ports[0], order(key));
    const HttpResponse b = send(ports[1], order(key));
    EXPECT_TRUE(e2e::is_replay(a) && e2e::is_replay(b)) << describe(a) << describe(b);
    EXPECT_EQ(e2e::execution_of(a), e2e::execution_of(b));
  }
  EXPECT_EQ(first.upstream_total(), static_cast<std::uint64_t>(kKeys));

  // The two processes' own counts agree with what the clients saw.
  double executions = 0;
  double in_flight = 0;
  double replays = 0;
  for (ProxyHarness* proxy : {&first, &second}) {
    const std::string text = admin_get(admin_port_of(*proxy->proxy_process()), "/metrics").body;
    auto count = [&](std::string_view decision) {
      return metric_value(text, "idemproxy_requests_total{route=\"orders\",decision=\"" + std::string(decision) + "\"}")
          .value_or(0);
    };
    executions += count("new");
    in_flight += count("in_flight_409");
    replays += count("replay");
  }
  EXPECT_EQ(executions, kKeys);
  EXPECT_EQ(in_flight, conflicts);
  const int replays_checked = 2 * ((kKeys + 4) / 5);
  EXPECT_EQ(replays, kKeys * kRequestsPerKey - kKeys - conflicts + replays_checked);
  RecordProperty("in_flight_409", conflicts);
  if (HasFailure()) std::cerr << first.diagnostics() << second.diagnostics();
}

}  // namespace
}  // namespace idem::test::ops
