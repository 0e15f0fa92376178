// in_flight: wait under a burst: duplicates of a slow first request are held and answered with
// its response when it completes, instead of a 409 each.
#include <latch>
#include <thread>
#include <vector>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/proxy_fixture.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;

class WaitingDuplicates : public FailureTest {};

TEST_F(WaitingDuplicates, FiftyConcurrentDuplicatesGetTheSameBytesFromOneExecution) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "2s"}, {"LEASE", "4s"}, {"WAIT_TIMEOUT", "5s"}}));
  const std::string key = unique_key("wait");
  constexpr int kDuplicates = 50;

  std::latch ready(kDuplicates);
  std::vector<HttpResponse> responses(kDuplicates);
  std::vector<std::thread> clients;
  for (int i = 0; i < kDuplicates; ++i) {
    clients.emplace_back([&, i] {
      const HttpRequest request = keyed_post("/wait", key).with("X-Test-Delay-Ms", "500");
      ready.arrive_and_wait();
      responses[i] = send(rig.proxy_port(), request, 10s);
    });
  }
  for (auto& client : clients) client.join();

  EXPECT_EQ(rig.upstream_count(key), 1u);
  int originals = 0;
  const HttpResponse& reference = responses.front();
  for (const HttpResponse& response : responses) {
    ASSERT_EQ(response.status, 200) << describe(response);
    if (!is_replay(response)) ++originals;
    EXPECT_EQ(response.body, reference.body) << "not byte-identical";
    EXPECT_EQ(response.header(upstream::kExecutionHeader), reference.header(upstream::kExecutionHeader));
    EXPECT_EQ(response.header("Content-Type"), reference.header("Content-Type"));
  }
  EXPECT_EQ(originals, 1) << "exactly one client sees the execution itself, the others its replay";
}

}  // namespace
}  // namespace idem::test::failure
