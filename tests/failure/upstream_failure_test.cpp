// The upstream misbehaves while the proxy stays up: it hangs past upstream.timeout (the request
// was sent, the outcome is unknown) or it is not there at all (nothing was sent, nothing is locked).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "failure/failure_fixture.hpp"
#include "failure/failure_requests.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {
namespace {

using namespace std::chrono_literals;

class UpstreamFailure : public FailureTest {};

// An address whose connects neither complete nor fail, as behind a firewall that drops SYNs: a
// loopback listener whose accept queue is full (Linux then drops every new SYN, counted as a
// listen overflow; the client retransmits for minutes). It is filled with connects of its own
// until one of them hangs, which proves the next one will.
class SilentListener {
 public:
  SilentListener() {
    listener_ = checked(::socket(AF_INET, SOCK_STREAM, 0), "socket");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    checked(::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address), "bind");
    checked(::listen(listener_, 0), "listen");
    socklen_t size = sizeof address;
    checked(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size), "getsockname");
    port_ = ntohs(address.sin_port);
    for (int attempt = 0; attempt < 16; ++attempt) {
      if (!connects_at_once(address)) return;
    }
    throw std::runtime_error("the listener's accept queue never filled: connects keep completing");
  }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  ~SilentListener() {
    for (const int fd : clients_) ::close(fd);
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }

 private:
  static int checked(int result, const char* what) {
    if (result < 0) throw std::runtime_error(std::string(what) + " failed: errno " + std::to_string(errno));
    return result;
  }
  // One more client (kept open, never accepted); whether its connect completed within 300 ms.
  bool connects_at_once(const sockaddr_in& address) {
    const int fd = checked(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), "socket");
    clients_.push_back(fd);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) return true;
    if (errno != EINPROGRESS) throw std::runtime_error("connect failed: errno " + std::to_string(errno));
    pollfd writable{fd, POLLOUT, 0};
    return ::poll(&writable, 1, 300) == 1;
  }

  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> clients_;
};

TEST_F(UpstreamFailure, HangPastTimeoutIs504ThenLockedUnknownUntilReleasedThenExecutesOnce) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", "5s"}}));
  const std::string key = unique_key("hang-lock");

  const auto sent_at = std::chrono::steady_clock::now();
  const HttpResponse timed_out = send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Hang", "1"));
  EXPECT_EQ(timed_out.status, 504) << describe(timed_out);
  EXPECT_EQ(problem_slug(timed_out), "upstream-timeout") << describe(timed_out);
  EXPECT_GE(elapsed_ms(sent_at), 900) << "answered before upstream.timeout";
  EXPECT_LT(elapsed_ms(sent_at), 3000) << "upstream.timeout not enforced";
  EXPECT_EQ(rig.upstream_count(key), 1u);

  // Immediately, not only after the lease: the timeout itself made the outcome terminal.
  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(retried.status, 502) << describe(retried);
  EXPECT_EQ(problem_slug(retried), "outcome-unknown") << describe(retried);
  EXPECT_EQ(rig.upstream_count(key), 1u) << "an unknown outcome was executed again";

  const RecordInspection record = rig.inspect("lock", key);
  EXPECT_EQ(record.exit_status, 0) << record.output;
  EXPECT_EQ(record.state, "unknown") << record.output;

  // The operator reconciled it with the upstream and releases the key: the next retry runs.
  const RunResult released = rig.release("lock", key);
  EXPECT_EQ(released.exit_status, 0) << released.stdout_text << released.stderr_text;
  EXPECT_EQ(rig.inspect("lock", key).exit_status, 3) << "the released record is still there";
  const HttpResponse executed = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(executed.status, 200) << describe(executed);
  EXPECT_FALSE(is_replay(executed));
  EXPECT_EQ(rig.upstream_count(key), 2u);
  const HttpResponse replayed = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(replayed.body, executed.body);
  EXPECT_EQ(rig.upstream_count(key), 2u);
}

TEST_F(UpstreamFailure, HangPastTimeoutOnRetryRouteStaysInFlightUntilTheLeaseThenExecutesAgain) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", "5s"}}));
  const std::string key = unique_key("hang-retry");

  const auto sent_at = std::chrono::steady_clock::now();
  const HttpResponse timed_out = send(rig.proxy_port(), keyed_post("/retry", key).with("X-Test-Hang", "1"));
  EXPECT_EQ(timed_out.status, 504) << describe(timed_out);
  EXPECT_EQ(problem_slug(timed_out), "upstream-timeout") << describe(timed_out);

  const HttpResponse early = send(rig.proxy_port(), keyed_post("/retry", key));
  EXPECT_EQ(early.status, 409) << describe(early);
  EXPECT_EQ(problem_slug(early), "request-in-flight") << describe(early);
  EXPECT_EQ(rig.inspect("retry", key).state, "in_flight");
  EXPECT_EQ(rig.upstream_count(key), 1u);

  std::this_thread::sleep_until(sent_at + 5s + 300ms);  // past the 5 s lease
  const HttpResponse executed = send(rig.proxy_port(), keyed_post("/retry", key));
  EXPECT_EQ(executed.status, 200) << describe(executed);
  EXPECT_FALSE(is_replay(executed));
  EXPECT_EQ(rig.upstream_count(key), 2u);
}

TEST_F(UpstreamFailure, UnreachableUpstreamIs502AndReleasesTheKeySoTheRetryExecutesOnce) {
  ProxyRig& rig = start_rig(rig_options({}, {}, false));
  const std::string key = unique_key("down");

  const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(refused.status, 502) << describe(refused);
  EXPECT_EQ(problem_slug(refused), "upstream-unreachable") << describe(refused);
  const RecordInspection record = rig.inspect("lock", key);
  EXPECT_EQ(record.exit_status, 3) << "nothing was sent, yet the key is held: " << record.output;

  rig.start_upstream();
  const HttpResponse executed = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(executed.status, 200) << describe(executed);
  EXPECT_FALSE(is_replay(executed));
  EXPECT_EQ(rig.upstream_count(key), 1u);
  const HttpResponse replayed = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_TRUE(is_replay(replayed)) << describe(replayed);
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

// The upstream's address takes the SYN and never answers: nothing was sent, so the key is released
// at upstream.connect_timeout (500 ms here), long before upstream.timeout, and the retry executes.
TEST_F(UpstreamFailure, AnUpstreamThatNeverAnswersTheConnectIs502AtTheConnectTimeoutAndReleasesTheKey) {
  SilentListener silent;
  RigOptions options = rig_options({{"UPSTREAM_TIMEOUT", "5s"}, {"LEASE", "9s"}});
  options.route_upstream = [&silent](std::uint16_t) { return silent.port(); };
  ProxyRig& rig = start_rig(options);
  const std::string key = unique_key("silent");

  const auto sent_at = std::chrono::steady_clock::now();
  const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(refused.status, 502) << describe(refused);
  EXPECT_EQ(problem_slug(refused), "upstream-unreachable") << describe(refused);
  EXPECT_GE(elapsed_ms(sent_at), 450) << "answered before upstream.connect_timeout";
  EXPECT_LT(elapsed_ms(sent_at), 3000) << "upstream.connect_timeout not enforced (upstream.timeout is 5 s)";
  EXPECT_EQ(rig.inspect("lock", key).exit_status, 3) << "nothing was sent, yet the key is held";
  EXPECT_EQ(rig.upstream_count(key), 0u);
}

TEST_F(UpstreamFailure, ConnectionDroppedAfterTheRequestWasSentIsAnUnknownOutcome) {
  ProxyRig& rig = start_rig(rig_options({{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", "5s"}}));
  const std::string key = unique_key("reset");

  const HttpResponse dropped = send(rig.proxy_port(), keyed_post("/lock", key).with("X-Test-Reset", "1"));
  EXPECT_EQ(dropped.status, 502) << describe(dropped);
  EXPECT_EQ(problem_slug(dropped), "upstream-bad-response") << describe(dropped);
  EXPECT_EQ(rig.upstream_count(key), 1u);

  const HttpResponse retried = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(retried.status, 502) << describe(retried);
  EXPECT_EQ(problem_slug(retried), "outcome-unknown") << describe(retried);
  EXPECT_EQ(rig.upstream_count(key), 1u);
  EXPECT_EQ(rig.inspect("lock", key).state, "unknown");
}

TEST_F(UpstreamFailure, EveryUpstreamConnectionBusyIs503AndReleasesTheKey) {
  ProxyRig& rig = start_rig(
      rig_options({{"UPSTREAM_TIMEOUT", "3s"}, {"LEASE", "7s"}, {"WORKERS", "1"}, {"UPSTREAM_MAX_CONNECTIONS", "1"}}));
  const std::string busy_key = unique_key("pool-busy");
  const std::string key = unique_key("pool-full");
  auto busy = std::async(std::launch::async, [&] {
    return send(rig.proxy_port(), keyed_post("/lock", busy_key).with("X-Test-Delay-Ms", "1000"));
  });
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (rig.upstream_count(busy_key) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(rig.upstream_count(busy_key), 1u);

  const HttpResponse refused = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(refused.status, 503) << describe(refused);
  EXPECT_EQ(problem_slug(refused), "upstream-unreachable") << describe(refused);
  EXPECT_EQ(retry_after_seconds(refused), 1) << describe(refused);
  EXPECT_EQ(rig.upstream_count(key), 0u);
  EXPECT_EQ(rig.inspect("lock", key).exit_status, 3) << "nothing was sent, yet the key is held";

  EXPECT_EQ(busy.get().status, 200);
  const HttpResponse executed = send(rig.proxy_port(), keyed_post("/lock", key));
  EXPECT_EQ(executed.status, 200) << describe(executed);
  EXPECT_FALSE(is_replay(executed));
  EXPECT_EQ(rig.upstream_count(key), 1u);
}

}  // namespace
}  // namespace idem::test::failure
