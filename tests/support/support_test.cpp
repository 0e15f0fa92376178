// The test tools themselves: idem-test-upstream does what its headers ask and counts right, and
// the process, port and HTTP helpers behave, so an e2e failure points at the proxy, not at them.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cerrno>
#include <chrono>

#include "support/blocking_pg.hpp"
#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/process.hpp"
#include "support/proxy_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/upstream_process.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test {
namespace {

namespace proto = upstream;

class TestUpstreamServer : public ::testing::Test {
 protected:
  void SetUp() override { upstream_.emplace(start_test_upstream(dir_.path())); }
  void TearDown() override {
    if (upstream_ && HasFailure()) std::cerr << upstream_->process.describe();
  }
  std::uint16_t port() const { return upstream_->port; }

  TempDir dir_{"idem-support"};
  std::optional<TestUpstream> upstream_;
};

boost::json::object json_body(const HttpResponse& response) {
  return boost::json::parse(response.body).as_object();
}

TEST_F(TestUpstreamServer, CountsExecutionsPerKeyAndWebhookIdButNotControlRequests) {
  EXPECT_EQ(upstream_total(port()), 0u);
  const auto first = send(port(), HttpRequest::post("/orders", "{}").with("Idempotency-Key", "\"k1\""));
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.header(proto::kExecutionHeader), "1");
  const auto body = json_body(first);
  EXPECT_EQ(body.at("execution").as_int64(), 1);
  EXPECT_EQ(body.at("key").as_string(), "\"k1\"");
  EXPECT_TRUE(body.at("x_forwarded_for").is_null());
  EXPECT_EQ(body.at("body_sha256").as_string(), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
  send(port(), HttpRequest::post("/orders", "{}").with("Idempotency-Key", "k1"));
  send(port(), HttpRequest::post("/webhooks/x", "{}").with("webhook-id", "evt 1"));

  EXPECT_EQ(upstream_total(port()), 3u);
  EXPECT_EQ(upstream_count_for_key(port(), "\"k1\""), 1u);  // raw values: quoted and bare differ
  EXPECT_EQ(upstream_count_for_key(port(), "k1"), 1u);
  EXPECT_EQ(upstream_count_for_key(port(), "k2"), 0u);
  EXPECT_EQ(upstream_count_for_webhook_id(port(), "evt 1"), 1u);
  upstream_reset(port());
  EXPECT_EQ(upstream_total(port()), 0u);
  EXPECT_EQ(upstream_count_for_key(port(), "k1"), 0u);
}

TEST_F(TestUpstreamServer, StatusHeadersAndDelayAreObeyed) {
  const auto started = std::chrono::steady_clock::now();
  const auto response = send(port(), HttpRequest::post("/x", "")
                                         .with(std::string(proto::kStatusHeader), "503")
                                         .with(std::string(proto::kDelayHeader), "300")
                                         .with(std::string(proto::kAddHeaderHeader), "Set-Cookie: a=1")
                                         .with(std::string(proto::kAddHeaderHeader), "Set-Cookie: b=2"));
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(300));
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.header_values("set-cookie"), (std::vector<std::string>{"a=1", "b=2"}));
}

TEST_F(TestUpstreamServer, SizedChunkedAndEchoedBodies) {
  const auto sized = send(port(), HttpRequest::get("/x").with(std::string(proto::kBodySizeHeader), "70000")
                                      .with(std::string(proto::kChunkedHeader), "1"));
  ASSERT_TRUE(sized.ok()) << sized.error;
  EXPECT_EQ(sized.header("Transfer-Encoding"), "chunked");
  EXPECT_EQ(sized.body, proto::pattern_body(70000));
  EXPECT_EQ(sized.header("Content-Type"), "application/octet-stream");

  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  const auto echoed = send(port(), HttpRequest::post("/x", bytes, "application/x-bytes").with(std::string(proto::kEchoHeader), "1"));
  ASSERT_TRUE(echoed.ok()) << echoed.error;
  EXPECT_EQ(echoed.body, bytes);
  EXPECT_EQ(echoed.header("Content-Type"), "application/x-bytes");
}

TEST_F(TestUpstreamServer, HeadHasLengthButNoBody) {
  HttpRequest head = HttpRequest::get("/x");
  head.method = "HEAD";
  const auto response = send(port(), head);
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_TRUE(response.body.empty());
  EXPECT_NE(response.header("Content-Length").value_or("0"), "0");
}

TEST_F(TestUpstreamServer, HangNeverAnswersAndResetClosesWithoutAnswer) {
  const auto hung = send(port(), HttpRequest::post("/x", "").with(std::string(proto::kHangHeader), "1"),
                         std::chrono::milliseconds(300));
  EXPECT_FALSE(hung.ok());
  const auto reset = send(port(), HttpRequest::post("/x", "").with(std::string(proto::kResetHeader), "1"));
  EXPECT_FALSE(reset.ok());
  EXPECT_EQ(upstream_total(port()), 2u);
}

TEST_F(TestUpstreamServer, KeepAliveConnectionServesSeveralRequests) {
  HttpConnection connection(port());
  for (int i = 1; i <= 3; ++i) {
    const auto response = connection.send(HttpRequest::post("/x", "{}"));
    ASSERT_TRUE(response.ok()) << response.error;
    EXPECT_EQ(response.header(proto::kExecutionHeader), std::to_string(i));
  }
  EXPECT_TRUE(connection.is_open());
}

TEST_F(TestUpstreamServer, RawExchangeSeesTheBytesAndTheClose) {
  const auto exchange = raw_exchange(port(), "GET /__count HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                     std::chrono::seconds(5));
  EXPECT_TRUE(exchange.error.empty()) << exchange.error;
  EXPECT_TRUE(exchange.peer_closed);
  EXPECT_TRUE(exchange.received.starts_with("HTTP/1.1 200 OK\r\n")) << exchange.received;
  EXPECT_NE(exchange.received.find(R"({"total":0})"), std::string::npos) << exchange.received;
}

TEST(Process, RunToExitCollectsStatusAndOutput) {
  TempDir dir("idem-support");
  const auto result =
      run_to_exit({"/bin/sh", {"-c", "echo out; echo err >&2; exit 3"}, {{"EXTRA", "x"}}, dir.path(), "sh"},
                  std::chrono::seconds(10));
  EXPECT_EQ(result.exit_status, 3);
  EXPECT_EQ(result.stdout_text, "out\n");
  EXPECT_EQ(result.stderr_text, "err\n");
}

TEST(Process, ExtraEnvironmentReachesTheChild) {
  TempDir dir("idem-support");
  const auto result = run_to_exit({"/bin/sh", {"-c", "printf %s \"$IDEM_SUPPORT_PROBE\""}, {{"IDEM_SUPPORT_PROBE", "v1"}},
                                   dir.path(), "env"},
                                  std::chrono::seconds(10));
  EXPECT_EQ(result.stdout_text, "v1");
}

TEST(Process, TerminateReportsTheSignal) {
  TempDir dir("idem-support");
  Process process = Process::start({"/bin/sleep", {"30"}, {}, dir.path(), "sleep"});
  EXPECT_TRUE(process.running());
  EXPECT_EQ(process.terminate(std::chrono::seconds(5)), 128 + SIGTERM);
  EXPECT_FALSE(process.running());
  EXPECT_FALSE(process.signal(SIGTERM));
}

TEST(Process, StartFailsForAMissingExecutable) {
  TempDir dir("idem-support");
  EXPECT_THROW(Process::start({"/nonexistent/binary", {}, {}, dir.path(), "missing"}), std::runtime_error);
}

TEST(Ports, FreePortIsNotListenedOn) {
  const auto port = free_port();
  EXPECT_GT(port, 0);
  EXPECT_FALSE(port_accepts(port));
  EXPECT_FALSE(wait_for_port(port, std::chrono::milliseconds(100)));
}

// bind() of 127.0.0.1:port on a fresh socket: 0, or the errno it failed with.
int bind_errno(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = loopback(port);
  const int result = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 ? 0 : errno;
  ::close(fd);
  return result;
}

// While reserved, nothing else can bind the port and a connect is refused (what an upstream that
// is not started yet must look like); once released, a server can take it.
TEST(Ports, AReservedPortRefusesConnectsAndCannotBeTakenUntilReleased) {
  PortReservation reservation;
  const std::uint16_t port = reservation.port();
  ASSERT_GT(port, 0);
  EXPECT_FALSE(port_accepts(port));
  EXPECT_EQ(bind_errno(port), EADDRINUSE);
  reservation.release();
  EXPECT_EQ(bind_errno(port), 0);
  TempDir dir("idem-reserved-port");
  TestUpstream upstream = start_test_upstream(dir.path(), port, "after-release");
  EXPECT_TRUE(wait_for_port(port, std::chrono::seconds(5)));
  upstream.process.terminate(std::chrono::seconds(5));
}

// A reservation for a reuseport server (the proxy's workers bind so): that server can bind and
// listen on the port while it is held, nothing else can bind it, and without the flag even a
// reuseport listener is kept out (what stops two tests' proxies sharing one port).
int reuseport_listen(std::uint16_t port, int& fd) {
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
  sockaddr_in address = loopback(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return errno;
  return ::listen(fd, 16) == 0 ? 0 : errno;
}

TEST(Ports, AReservationForReuseportLetsOnlyAReuseportServerIn) {
  PortReservation shared(true);
  const std::uint16_t port = shared.port();
  EXPECT_EQ(bind_errno(port), EADDRINUSE) << "a plain bind (and so a bind to port 0) never gets it";
  int listener = -1;
  EXPECT_EQ(reuseport_listen(port, listener), 0);
  EXPECT_TRUE(port_accepts(port));
  shared.release();
  EXPECT_TRUE(port_accepts(port)) << "the server keeps the port once the reservation goes";
  ::close(listener);

  PortReservation exclusive;
  int outsider = -1;
  EXPECT_EQ(reuseport_listen(exclusive.port(), outsider), EADDRINUSE);
  ::close(outsider);
}

TEST(ProxyConfig, TemplateReplacesOnlyKnownNames) {
  EXPECT_EQ(render_template("a ${X} b ${Y} ${X}", {{"X", "1"}}), "a 1 b ${Y} 1");
  EXPECT_EQ(yaml_quoted(R"(host=a pass="q\")"), R"("host=a pass=\"q\\\"")");
  const auto config = render_template(default_config_template(), {{"PROXY_PORT", "1"}, {"UPSTREAM_PORT", "2"}});
  EXPECT_NE(config.find("listen: 127.0.0.1:1\n"), std::string::npos);
  EXPECT_NE(config.find("http://127.0.0.1:2"), std::string::npos);
}

// DSN edits are libpq parsing only: no server needed.
TEST(BlockingPgDsn, KeywordReplacedOrAddedInKeyValueForm) {
  EXPECT_EQ(dsn_with("host=127.0.0.1 port=5432 dbname=postgres", "dbname", "other"),
            "host=127.0.0.1 port=5432 dbname=other");
  EXPECT_EQ(dsn_with("postgresql://u@127.0.0.1:5433/db", "application_name", "it's"),
            "user=u dbname=db host=127.0.0.1 port=5433 application_name='it\\'s'");
  EXPECT_THROW(dsn_with("host='unterminated", "port", "1"), std::runtime_error);
}

TEST(BlockingPgDsn, SearchPathKeepsTheServerOptions) {
  EXPECT_EQ(dsn_with_search_path("host=h", "s1"), "host=h options='-c search_path=s1'");
  EXPECT_EQ(dsn_with_search_path("host=h options='-c work_mem=4MB'", "s1"),
            "host=h options='-c work_mem=4MB -c search_path=s1'");
}

}  // namespace
}  // namespace idem::test
