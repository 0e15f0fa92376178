// Unix sockets both ways: an upstream that listens on one (unix:/path, here a small counting
// service, scripts/unix_upstream.py), and the proxy listening on one beside its TCP address, for a
// service that reaches its sidecar that way. Executions are counted by the upstreams.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "support/eventually.hpp"
#include "support/temp_dir.hpp"

namespace idem::test::e2e {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";

fs::path script(std::string_view name) { return fs::path(IDEM_E2E_SCRIPTS_DIR) / std::string(name); }

// One request over a unix socket, `Connection: close`: the raw answer, everything until the close.
std::string exchange_over_unix_socket(const fs::path& socket_path, const std::string& request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket: " + std::string(std::strerror(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string answer;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    answer = "connect: " + std::string(std::strerror(errno));
  } else if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    answer = "write failed";
  } else {
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return answer;
}

std::string order_request(const std::string& target, const std::string& key) {
  const std::string body = R"({"sku":"a"})";
  return "POST " + target + " HTTP/1.1\r\nHost: orders.local\r\nIdempotency-Key: " + key +
         "\r\nX-Tenant-Id: t1\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

constexpr char kConfig[] = R"(
listen: ["127.0.0.1:${PROXY_PORT}", "unix:${SOCKET_DIR}/proxy.sock"]
workers: 2
admin: { listen: "127.0.0.1:0" }
upstreams:
  - { name: api, url: "http://127.0.0.1:${UPSTREAM_PORT}", connect_timeout: 1s, timeout: 5s }
  - { name: local, url: "unix:${SOCKET_DIR}/upstream.sock", connect_timeout: 1s, timeout: 5s }
store: { postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
defaults: { ttl: 1h, lease: 10s }
routes:
  - name: local-orders
    match: { method: POST, path: /local/orders }
    upstream: local
    scope: { headers: [X-Tenant-Id] }
  - name: local-files
    match: { path: /local/files/* }
    upstream: local
    key: off
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
)";

class UnixSockets : public ProxyTest {
 protected:
  void SetUp() override {
    local_.emplace(Process::start(ProcessSpec{.executable = kPython,
                                              .args = {script("unix_upstream.py").string(), "--socket",
                                                       (sockets_.path() / "upstream.sock").string()},
                                              .env = {},
                                              .log_dir = sockets_.path(),
                                              .name = "unix-upstream"}));
    const auto line = local_->wait_for_stdout_line("listening 127.0.0.1:", 10s);
    if (!line) throw std::runtime_error("unix_upstream.py did not start:\n" + local_->describe());
    local_control_port_ = static_cast<std::uint16_t>(std::stoul(line->substr(line->rfind(':') + 1)));
    ProxyTest::SetUp();
  }
  void TearDown() override {
    ProxyTest::TearDown();
    if (local_) local_->terminate(5s);
  }
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = kConfig;
    options.variables["SOCKET_DIR"] = sockets_.path().string();
    return options;
  }
  fs::path proxy_socket() const { return sockets_.path() / "proxy.sock"; }

  TempDir sockets_{"idem-sock"};  // short: a socket path holds at most 107 bytes
  std::optional<Process> local_;
  std::uint16_t local_control_port_ = 0;
};

// A route whose upstream is a unix socket: executed there once, replayed after; a passthrough
// route to it streams as any other.
TEST_F(UnixSockets, AnUpstreamOnAUnixSocketIsGuardedLikeAnyOther) {
  const std::string key = unique_key("unix-upstream");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const HttpResponse answer =
        send(HttpRequest::post("/local/orders", R"({"sku":"a"})").with("Idempotency-Key", key).with("X-Tenant-Id", "t1"));
    ASSERT_EQ(answer.status, 200) << answer.body << answer.error;
    EXPECT_NE(answer.body.find(R"("upstream": "unix")"), std::string::npos) << answer.body;
    EXPECT_EQ(is_replay(answer), attempt == 1) << answer.body;
  }
  EXPECT_EQ(upstream_count_for_key(local_control_port_, key), 1u);
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), key), 0u);

  const HttpResponse file = send(HttpRequest::get("/local/files/report.csv"));
  ASSERT_EQ(file.status, 200) << file.body << file.error;
  EXPECT_NE(file.body.find(R"("path": "/local/files/report.csv")"), std::string::npos) << file.body;
}

// The proxy listens on its unix socket beside its TCP address: a request that comes that way is
// routed and guarded as one over TCP (the same key replays across both), its peer forwarded as
// X-Forwarded-For: unix.
TEST_F(UnixSockets, TheProxyListensOnAUnixSocketToo) {
  struct stat status {};
  ASSERT_EQ(::stat(proxy_socket().c_str(), &status), 0);
  EXPECT_TRUE(S_ISSOCK(status.st_mode));
  EXPECT_EQ(status.st_mode & 0777, 0666u) << "the directory, not the socket, says who may connect";

  const std::string key = unique_key("unix-listener");
  const std::string first = exchange_over_unix_socket(proxy_socket(), order_request("/orders", key));
  ASSERT_TRUE(first.starts_with("HTTP/1.1 200")) << first;
  EXPECT_EQ(first.find("Idempotent-Replay"), std::string::npos) << first;
  const std::string again = exchange_over_unix_socket(proxy_socket(), order_request("/orders", key));
  ASSERT_TRUE(again.starts_with("HTTP/1.1 200")) << again;
  EXPECT_NE(again.find("Idempotent-Replay: true"), std::string::npos) << again;
  EXPECT_NE(first.find(R"("x_forwarded_for":"unix")"), std::string::npos) << first;
  // The same host (the scope holds it): the key replays over TCP too.
  const HttpResponse over_tcp = send(HttpRequest::post("/orders", R"({"sku":"a"})")
                                         .with("Host", "orders.local")
                                         .with("Idempotency-Key", key)
                                         .with("X-Tenant-Id", "t1"));
  EXPECT_TRUE(is_replay(over_tcp)) << over_tcp.body;
  EXPECT_EQ(upstream_count_for_key(proxy().upstream_port(), key), 1u);
}

// The socket file goes with the proxy; a stale one left by a killed proxy is replaced at start.
TEST_F(UnixSockets, TheSocketFileGoesWithTheProxyAndAStaleOneIsReplaced) {
  proxy().proxy_process()->kill9();
  ASSERT_TRUE(proxy().proxy_process()->wait_exit(5s));
  ASSERT_TRUE(fs::exists(proxy_socket())) << "a killed proxy cannot remove it";
  proxy().restart_proxy();
  const std::string key = unique_key("after-restart");
  const std::string answer = exchange_over_unix_socket(proxy_socket(), order_request("/orders", key));
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 200")) << answer;

  ASSERT_EQ(proxy().stop_proxy(10s), 0);
  EXPECT_FALSE(fs::exists(proxy_socket())) << "removed at exit";
}

// On SIGTERM the unix socket stops listening at once (a new client is refused, as on TCP), while the
// request in progress drains to its answer.
TEST_F(UnixSockets, ADrainingProxyRefusesNewClientsOnItsSocketAtOnce) {
  const std::string key = unique_key("drain");
  HttpResponse in_flight;
  std::thread slow([&] {
    in_flight = send(HttpRequest::post("/orders", R"({"sku":"a"})")
                         .with("Idempotency-Key", key)
                         .with("X-Tenant-Id", "t1")
                         .with("X-Test-Delay-Ms", "4000"),
                     15s);
  });
  ASSERT_TRUE(eventually([&] { return upstream_count_for_key(proxy().upstream_port(), key) == 1; }, 5s));
  ASSERT_TRUE(proxy().proxy_process()->signal(SIGTERM));
  EXPECT_TRUE(eventually([&] { return !fs::exists(proxy_socket()); }, 3s)) << "still listening while draining";
  const std::string refused = exchange_over_unix_socket(proxy_socket(), order_request("/orders", unique_key("late")));
  EXPECT_TRUE(refused.starts_with("connect:")) << refused;
  slow.join();
  EXPECT_EQ(in_flight.status, 200) << in_flight.error << in_flight.body;
  EXPECT_EQ(proxy().proxy_process()->wait_exit(10s), 0);
}

}  // namespace
}  // namespace idem::test::e2e
