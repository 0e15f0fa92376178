// The proxy's client-facing bounds, each crossed once against the real binary: too many header
// fields, too many header bytes, a request line too long, a slowloris client, an idle keep-alive
// client, one connection too many. Every test also checks that the proxy goes on serving a normal
// request afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "e2e/e2e_support.hpp"

namespace idem::test::security {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::string_view kDefaultLimitsLine = "limits: { max_request_body: 8MiB }";

// The fixture's config with its limits line replaced by limits_yaml.
ProxyOptions options_with_limits(std::string_view limits_yaml) {
  std::string text(default_config_template());
  const auto at = text.find(kDefaultLimitsLine);
  if (at == std::string::npos) throw std::runtime_error("fixture config has no default limits line");
  text.replace(at, kDefaultLimitsLine.size(), limits_yaml);
  ProxyOptions options;
  options.config_template = std::move(text);
  return options;
}

// A plain request on the "off-route" route (no idempotency key involved): Host is its only field.
HttpRequest plain_get() { return HttpRequest::get("/plain/ping"); }

void expect_served(std::uint16_t port) {
  const auto response = test::send(port, plain_get());
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, 200) << describe(response);
}

// A connected loopback TCP socket, closed on destruction: for clients no HTTP library would be.
class RawSocket {
 public:
  explicit RawSocket(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect() to the proxy failed");
    }
  }
  ~RawSocket() { ::close(fd_); }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  // False when the peer has already closed (EPIPE/ECONNRESET).
  bool send_all(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Waits up to timeout for the peer to close, discarding whatever it sends first. True on EOF or
  // reset; false when the connection is still open at the deadline.
  bool wait_for_close(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    char sink[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms) return false;
      pollfd entry{fd_, POLLIN, 0};
      const int ready = ::poll(&entry, 1, static_cast<int>(left.count()));
      if (ready < 0) return false;
      if (ready == 0) return false;
      const ssize_t n = ::recv(fd_, sink, sizeof sink, 0);
      if (n <= 0) return true;
      received_.append(sink, static_cast<std::size_t>(n));
    }
  }

  const std::string& received() const { return received_; }

 private:
  int fd_;
  std::string received_;
};

class SecurityMaxHeaders : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    return options_with_limits("limits: { max_request_body: 8MiB, max_headers: 3 }");
  }
};

TEST_F(SecurityMaxHeaders, FiveHeaderFieldsGet431ThenANormalRequestIsServed) {
  auto request = plain_get();
  request.with("X-One", "1").with("X-Two", "2").with("X-Three", "3").with("X-Four", "4");  // + Host = 5
  e2e::expect_problem(send(request), 431, "headers-too-large");
  EXPECT_EQ(upstream_total(), 0u);
  expect_served(proxy().proxy_port());
}

class SecurityMaxHeaderBytes : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    return options_with_limits("limits: { max_request_body: 8MiB, max_header_bytes: 1KiB }");
  }
};

TEST_F(SecurityMaxHeaderBytes, TwoKibibyteHeaderGets431ThenANormalRequestIsServed) {
  auto request = plain_get();
  request.with("X-Padding", std::string(2048, 'p'));
  e2e::expect_problem(send(request), 431, "headers-too-large");
  EXPECT_EQ(upstream_total(), 0u);
  expect_served(proxy().proxy_port());
}

// The same bound when the head arrives a few whole lines at a time, each piece well under the
// limit: the total counts, not the size of any one read (Beast parses whole fields as they come).
TEST_F(SecurityMaxHeaderBytes, HeadSentInWholeLinesStillGets431AtTheTotal) {
  RawSocket client(proxy().proxy_port());
  ASSERT_TRUE(client.send_all("GET /plain/ping HTTP/1.1\r\nHost: a\r\n"));
  for (int piece = 0; piece < 12; ++piece) {  // 12 x 212 bytes: 2.5 KiB against 1 KiB
    if (!client.send_all("X-Piece-" + std::to_string(piece % 10) + ": " + std::string(200, 'p') + "\r\n")) break;
    std::this_thread::sleep_for(30ms);  // each piece its own read
  }
  client.send_all("\r\n");
  ASSERT_TRUE(client.wait_for_close(5000ms)) << "connection still open; received: " << client.received();
  EXPECT_EQ(client.received().rfind("HTTP/1.1 431", 0), 0u) << client.received();
  EXPECT_NE(client.received().find("headers-too-large"), std::string::npos) << client.received();
  EXPECT_EQ(upstream_total(), 0u);
  expect_served(proxy().proxy_port());
}

// max_request_line (8 KiB by default) above max_header_bytes: a 2 KiB target overflows the head,
// not the request-line bound, so the answer is 431 and says so.
TEST_F(SecurityMaxHeaderBytes, TargetOverTheHeaderBytesButWithinMaxRequestLineGets431) {
  e2e::expect_problem(send(HttpRequest::get("/plain/" + std::string(2048, 'a'))), 431, "headers-too-large");
  EXPECT_EQ(upstream_total(), 0u);
  expect_served(proxy().proxy_port());
}

class SecurityMaxRequestLine : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    return options_with_limits("limits: { max_request_body: 8MiB, max_request_line: 1KiB, max_header_bytes: 4KiB }");
  }
};

// A target over max_request_line gets 414 whether or not the whole head still fits
// max_header_bytes; padding a header instead is still 431. Only the request within the limit
// reaches the upstream.
TEST_F(SecurityMaxRequestLine, LongTargetGets414EvenBeyondTheHeaderBytesThenANormalRequestIsServed) {
  // "GET " + target + " HTTP/1.1\r\n": 1,024 bytes exactly is within the limit.
  const std::string at_limit = "/plain/" + std::string(1024 - 4 - 7 - 11, 'a');
  const auto within = send(HttpRequest::get(at_limit));
  ASSERT_TRUE(within.ok()) << within.error;
  EXPECT_EQ(within.status, 200) << describe(within);

  e2e::expect_problem(send(HttpRequest::get(at_limit + "a")), 414, "uri-too-long");
  e2e::expect_problem(send(HttpRequest::get("/plain/" + std::string(8192, 'a'))), 414, "uri-too-long");
  auto padded = plain_get();
  padded.with("X-Padding", std::string(5000, 'p'));
  e2e::expect_problem(send(padded), 431, "headers-too-large");
  EXPECT_EQ(upstream_total(), 1u);
  expect_served(proxy().proxy_port());
}

class SecurityHeaderTimeout : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    return options_with_limits("limits: { max_request_body: 8MiB, header_timeout: 500ms }");
  }
};

// Slowloris: the headers arrive one byte per 200 ms and never end. The proxy must drop the client
// once header_timeout passes, however steadily it trickles, and serve others meanwhile.
TEST_F(SecurityHeaderTimeout, TricklingHeadersAreCutOffWhileOthersAreServed) {
  const std::string trickle = "X-Slow: " + std::string(64, 'a');  // never reaches the blank line
  RawSocket slow(proxy().proxy_port());
  const auto started = Clock::now();
  ASSERT_TRUE(slow.send_all("POST /x HTTP/1.1\r\nHost: a\r\n"));
  bool closed = false;
  bool other_served = false;
  for (std::size_t i = 0; i < trickle.size() && !closed; ++i) {
    if (!slow.send_all(trickle.substr(i, 1))) {
      closed = true;
      break;
    }
    if (!other_served) {
      expect_served(proxy().proxy_port());
      other_served = true;
    }
    closed = slow.wait_for_close(200ms);
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  EXPECT_TRUE(other_served);
  ASSERT_TRUE(closed) << "still open after " << elapsed.count() << " ms of trickling";
  EXPECT_LE(elapsed, 1500ms);
  expect_served(proxy().proxy_port());
}

class SecurityIdleTimeout : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    return options_with_limits("limits: { max_request_body: 8MiB, idle_timeout: 500ms }");
  }
};

TEST_F(SecurityIdleTimeout, IdleKeepAliveConnectionIsClosed) {
  RawSocket idle(proxy().proxy_port());
  ASSERT_TRUE(idle.send_all("GET /plain/ping HTTP/1.1\r\nHost: a\r\n\r\n"));
  // The response arrives first; then nothing, until the proxy gives up on the idle connection.
  const auto answered = Clock::now();
  ASSERT_TRUE(idle.wait_for_close(2000ms)) << "idle connection still open after 2 s; received: " << idle.received();
  const auto idle_for = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - answered);
  EXPECT_EQ(idle.received().rfind("HTTP/1.1 200", 0), 0u) << idle.received();
  EXPECT_GE(idle_for, 300ms) << "closed too early for a 500 ms idle timeout";
  expect_served(proxy().proxy_port());
}

// Each request moves the idle deadline on: a connection used every 250 ms outlives many 500 ms
// idle timeouts. (The connection's one timer, armed for an earlier deadline, fires early and
// must wait again rather than close: connection_deadline.hpp.)
TEST_F(SecurityIdleTimeout, AConnectionUsedMoreOftenThanTheIdleTimeoutStaysOpen) {
  HttpConnection connection(proxy().proxy_port());
  const auto started = Clock::now();
  for (int i = 0; i < 7; ++i) {
    if (i > 0) std::this_thread::sleep_for(250ms);
    const auto response = connection.send(plain_get());
    ASSERT_TRUE(response.ok()) << "request " << i << ": " << response.error;
    ASSERT_EQ(response.status, 200) << describe(response);
    ASSERT_TRUE(connection.is_open()) << "closed after request " << i;
  }
  EXPECT_GE(Clock::now() - started, 1500ms);
}

class SecurityMaxConnections : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    return options_with_limits("limits: { max_request_body: 8MiB, max_connections: 2 }");
  }
};

// A slot comes back when the proxy's session for it ends, which can be just after the client saw
// the connection close: the fixture's readiness probes (connect, close) and a refusal (whose close
// lingers for the rest of the request) hold theirs that long. So an exchange that meets no free slot
// is made again, every 50 ms for up to 3 s, and its last result is what the test judges.
template <class Make, class NoSlot>
auto made_again_while(Make make, NoSlot no_slot) {
  const auto deadline = Clock::now() + 3s;
  auto result = make();
  while (no_slot(result) && Clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    result = make();
  }
  return result;
}

// A connection the proxy served and keeps open.
std::unique_ptr<HttpConnection> served_connection(std::uint16_t port) {
  std::unique_ptr<HttpConnection> connection;
  HttpResponse response;
  const bool served = made_again_while(
      [&] {
        connection = std::make_unique<HttpConnection>(port);
        response = connection->send(plain_get());
        return response.ok() && response.status == 200 && connection->is_open();
      },
      [](bool ok) { return !ok; });
  EXPECT_TRUE(served) << describe(response);
  return connection;
}

TEST_F(SecurityMaxConnections, ThirdConnectionGets503UntilOneCloses) {
  const auto port = proxy().proxy_port();
  auto first = served_connection(port);
  const auto second = served_connection(port);
  ASSERT_FALSE(HasFailure());

  const auto refused = test::send(port, plain_get());
  e2e::expect_problem(refused, 503, "too-many-connections");
  EXPECT_FALSE(refused.keep_alive) << describe(refused);
  EXPECT_TRUE(refused.has_header("Retry-After")) << describe(refused);

  first.reset();  // frees a slot once the proxy sees the close
  const HttpResponse served = made_again_while([&] { return test::send(port, plain_get()); },
                                               [](const HttpResponse& r) { return !(r.ok() && r.status == 200); });
  ASSERT_TRUE(served.ok()) << served.error;
  EXPECT_EQ(served.status, 200) << describe(served);
  // The survivor of the first two is still served on its own connection.
  const auto again = second->send(plain_get());
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_EQ(again.status, 200) << describe(again);
}

// Every refusal path gives its connection slot back: more refused requests than
// max_connections, one kind after another (framing, target, TRACE with content, a bad chunk, a
// head cut off), then both slots serve at once and SIGTERM drains to exit 0.
TEST_F(SecurityMaxConnections, RefusedRequestsGiveBackTheirSlotsAndTheProxyStillDrains) {
  const auto port = proxy().proxy_port();
  const std::vector<std::string> refused = {
      "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
      "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: gzip\r\n\r\n",
      "TRACE /plain/x HTTP/1.1\r\nHost: svc\r\nContent-Length: 5\r\n\r\nhello",
      "POST /orders%2F HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n",
      "POST /plain/x HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 0\r\n\r\n",
      "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n",
      "POST /orders HTTP/1.1\r\nHost: svc\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",  // key missing
      "GARBAGE\r\n\r\n",
  };
  // An exchange that meets no free slot is made again (made_again_while): a slot kept for good fails
  // it, and the two connections held at the end prove that both slots came back.
  for (int round = 0; round < 2; ++round) {
    for (const std::string& bytes : refused) {
      const RawExchange exchange = made_again_while(
          [&] { return raw_exchange(port, bytes, 5s); },
          [](const RawExchange& e) { return e.received.find("too-many-connections") != std::string::npos; });
      ASSERT_TRUE(exchange.error.empty()) << exchange.error;
      EXPECT_TRUE(exchange.received.starts_with("HTTP/1.1 4") || exchange.received.starts_with("HTTP/1.1 5"))
          << bytes << "\n"
          << exchange.received.substr(0, 200);
      EXPECT_EQ(exchange.received.find("too-many-connections"), std::string::npos)
          << "a refused request kept its slot:\n"
          << bytes;
    }
  }
  {  // Both slots serve at once: none was kept.
    const auto first = served_connection(port);
    const auto second = served_connection(port);
  }
  EXPECT_EQ(proxy().stop_proxy(10s), 0) << "the proxy did not drain cleanly after the refusals";
}

}  // namespace
}  // namespace idem::test::security
