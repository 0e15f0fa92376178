// A client that hangs up does not cancel anything: the upstream call and the completion write
// run to the end, and the client's retry finds the stored response.
#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "failure/raw_client_socket.hpp"
#include "support/eventually.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;

class ClientDisconnect : public FailureTest {};

std::string raw_keyed_post(std::string_view key, std::string_view delay_ms) {
  const std::string body(kPaymentBody);
  return "POST /lock HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nIdempotency-Key: " +
         std::string(key) + "\r\nX-Test-Delay-Ms: " + std::string(delay_ms) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

bool wait_for_upstream(const ProxyRig& rig, std::string_view key, std::chrono::milliseconds timeout) {
  return eventually([&] { return rig.upstream_count(key) != 0; }, timeout, 10ms);
}

void expect_retry_replays_single_execution(ProxyRig& rig, const std::string& key) {
  const HttpResponse retried = send_until_settled(rig.proxy_port(), keyed_post("/lock", key), 3s);
  EXPECT_EQ(retried.status, 200) << describe(retried);
  EXPECT_TRUE(is_replay(retried)) << describe(retried);
  EXPECT_GT(execution_of(retried), 0u);
  EXPECT_EQ(rig.upstream_count(key), 1u);
  EXPECT_EQ(rig.inspect("lock", key).state, "completed");
}

TEST_F(ClientDisconnect, ClosedRightAfterSendingTheUpstreamStillRunsOnceAndTheRetryReplays) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "2s"}, {"LEASE", "6s"}}));
  const std::string key = unique_key("hangup-fin");
  {
    RawClientSocket socket(rig.proxy_port());
    socket.write_all(raw_keyed_post(key, "500"));
    socket.close_with_fin();
  }
  ASSERT_TRUE(wait_for_upstream(rig, key, 2s)) << "the request died with its client";
  expect_retry_replays_single_execution(rig, key);
}

TEST_F(ClientDisconnect, ResetWhileTheUpstreamWorksDoesNotCancelTheExecutionOrItsRecord) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "2s"}, {"LEASE", "6s"}}));
  const std::string key = unique_key("hangup-rst");
  {
    RawClientSocket socket(rig.proxy_port());
    socket.write_all(raw_keyed_post(key, "500"));
    ASSERT_TRUE(wait_for_upstream(rig, key, 2s));
    socket.close_with_reset();
  }
  expect_retry_replays_single_execution(rig, key);
}

}  // namespace
}  // namespace idem::test::failure
