// SIGTERM while clients keep the proxy busy over keep-alive connections: the proxy stops
// accepting, finishes what it accepted (responses and completion writes), and exits 0.
#include <signal.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/ports.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class GracefulShutdown : public FailureTest {};

struct Sent {
  std::string key;
  HttpResponse response;
};

TEST_F(GracefulShutdown, SigtermDuringSteadyLoadFinishesEveryAcceptedRequestAndExitsZero) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "3s"}, {"LEASE", "7s"}, {"DRAIN_TIMEOUT", "10s"}}));
  const std::uint16_t port = rig.proxy_port();
  constexpr int kClients = 6;
  constexpr int kMaxRequestsPerClient = 100;  // bound; the drain ends every loop long before

  std::mutex mutex;
  std::vector<Sent> sent;
  std::atomic<int> refused_reconnects{0};
  std::vector<std::jthread> clients;  // joined even when an assertion below returns early
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      HttpConnection connection(port, 10s);
      for (int n = 0; n < kMaxRequestsPerClient; ++n) {
        Sent one{unique_key("drain"), {}};
        one.response = connection.send(keyed_post("/lock", one.key).with("X-Test-Delay-Ms", "200"));
        const bool go_on = one.response.ok() && connection.is_open();
        {
          std::lock_guard lock(mutex);
          sent.push_back(std::move(one));
        }
        if (!go_on) break;
      }
      // The proxy ended this keep-alive connection: it must not take a new one either.
      if (!port_accepts(port)) refused_reconnects.fetch_add(1);
    });
  }

  std::this_thread::sleep_for(800ms);
  // A longer request keeps the drain going while the listener is probed.
  const std::string long_key = unique_key("drain-long");
  auto long_request = std::async(std::launch::async, [&] {
    return send(port, keyed_post("/lock", long_key).with("X-Test-Delay-Ms", "1500"));
  });
  const auto forward_deadline = Clock::now() + 1s;
  while (rig.upstream_count(long_key) == 0 && Clock::now() < forward_deadline) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(rig.upstream_count(long_key), 1u);

  rig.signal_proxy(SIGTERM);
  std::this_thread::sleep_for(150ms);
  EXPECT_TRUE(rig.proxy().running()) << "the proxy did not wait for the request in flight";
  EXPECT_FALSE(port_accepts(port)) << "a new connection was accepted after SIGTERM";

  const HttpResponse long_answer = long_request.get();
  EXPECT_EQ(long_answer.status, 200) << describe(long_answer);
  EXPECT_FALSE(long_answer.keep_alive) << "a response finished during the drain must close its connection";
  for (auto& client : clients) client.join();
  const std::optional<int> exit_status = rig.proxy().wait_exit(15s);
  EXPECT_EQ(exit_status, 0);
  EXPECT_EQ(refused_reconnects.load(), kClients);

  // Every request either got the upstream's answer, or was never taken in (nothing ran, nothing
  // is recorded): the race of a request written onto an idle connection as the proxy closes it.
  int answered = 0;
  int not_taken = 0;
  for (const Sent& one : sent) {
    if (one.response.ok()) {
      ++answered;
      EXPECT_EQ(one.response.status, 200) << describe(one.response);
      EXPECT_GT(execution_of(one.response), 0u) << describe(one.response);
    } else {
      ++not_taken;
      EXPECT_EQ(rig.upstream_count(one.key), 0u) << "accepted, executed, and left unanswered: " << one.response.error;
      EXPECT_EQ(rig.inspect("lock", one.key).exit_status, 3) << "a request without answer left a record";
    }
  }
  EXPECT_GE(answered, kClients) << "no steady load before the signal";

  // Every answer was stored before the proxy exited: a new proxy replays each one.
  rig.start_proxy();
  std::vector<std::pair<std::string, const HttpResponse*>> answers{{long_key, &long_answer}};
  for (const Sent& one : sent) {
    if (one.response.ok()) answers.emplace_back(one.key, &one.response);
  }
  for (const auto& [key, first] : answers) {
    const HttpResponse replay = send(port, keyed_post("/lock", key));
    EXPECT_TRUE(is_replay(replay)) << describe(replay);
    EXPECT_EQ(replay.body, first->body);
    EXPECT_EQ(rig.upstream_count(key), 1u);
  }
  std::cout << "[ drain    ] " << answered << " answered (all replayed by a new proxy), " << not_taken
            << " not taken in\n";
}

// Starts a request the upstream holds for upstream_work and returns once the upstream has it.
std::future<HttpResponse> start_slow_request(ProxyRig& rig, const std::string& key, std::chrono::milliseconds upstream_work) {
  auto answer = std::async(std::launch::async, [&rig, key, upstream_work] {
    return send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Delay-Ms", std::to_string(upstream_work.count())));
  });
  const auto deadline = Clock::now() + 2s;
  while (rig.upstream_count(key) == 0 && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  return answer;
}

TEST_F(GracefulShutdown, SecondSignalExitsAtOnceAndTheAbandonedRequestKeepsItsLease) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "5s"}, {"LEASE", "9s"}, {"DRAIN_TIMEOUT", "10s"}}));
  const std::string key = unique_key("second-signal");
  auto answer = start_slow_request(rig, key, 3000ms);
  ASSERT_EQ(rig.upstream_count(key), 1u);

  rig.signal_proxy(SIGTERM);
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(rig.proxy().running()) << "the first signal must drain, not exit";
  const auto second_at = Clock::now();
  rig.signal_proxy(SIGINT);
  const std::optional<int> exit_status = rig.proxy().wait_exit(1500ms);
  ASSERT_TRUE(exit_status.has_value()) << "still running " << elapsed_ms(second_at) << " ms after the second signal";
  EXPECT_NE(*exit_status, 0) << "a forced exit must not look like a clean drain";
  EXPECT_FALSE(answer.get().ok());

  // Nothing was completed or released: a new proxy holds retries off until the lease decides.
  rig.start_proxy();
  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(retried.status, 409) << describe(retried);
  EXPECT_EQ(problem_slug(retried), "request-in-flight") << describe(retried);
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

TEST_F(GracefulShutdown, DrainTimeoutEndsTheProcessWithStatusOne) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "5s"}, {"LEASE", "9s"}, {"DRAIN_TIMEOUT", "1s"}}));
  const std::string key = unique_key("drain-timeout");
  auto answer = start_slow_request(rig, key, 4000ms);
  ASSERT_EQ(rig.upstream_count(key), 1u);

  const auto signalled_at = Clock::now();
  rig.signal_proxy(SIGTERM);
  const std::optional<int> exit_status = rig.proxy().wait_exit(3500ms);
  ASSERT_TRUE(exit_status.has_value()) << "drain_timeout (1 s) not enforced";
  EXPECT_EQ(*exit_status, 1);
  EXPECT_GE(elapsed_ms(signalled_at), 900) << "exited before drain_timeout";
  EXPECT_FALSE(answer.get().ok());
  EXPECT_NE(rig.proxy_logs().find("\"drain_timeout\""), std::string::npos);
}

}  // namespace
}  // namespace idem::test::failure
