// Upgrades (README "Streaming and upgrades"): a WebSocket through the real idemproxy, with a real
// client and server from Debian's python3-websockets (ws_client.py, ws_upstream.py beside this
// file, run as processes on 127.0.0.1 port 0). What a user relies on: messages both ways for as
// long as the socket lives (past upstream.timeout), a close from either side reaching the other at
// once (the TCP end passed on: a client waits close_timeout, 5 s, for one that is not), an idle
// tunnel closed at limits.tunnel_idle_timeout, the same through the TLS listener to an https
// upstream, upgrades refused on guarded routes before anything reaches the upstream, h2c never
// forwarded, a declined upgrade served as any answer, and memory that does not grow with traffic.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "ops/ops_support.hpp"
#include "support/process.hpp"
#include "support/raw_upstream.hpp"
#include "support/proxy_fixture.hpp"
#include "support/streaming_client.hpp"
#include "support/test_pki.hpp"

namespace idem::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, where python3-websockets is installed

fs::path script(std::string_view name) {
#ifdef IDEM_WS_SCRIPTS_DIR
  return fs::path(IDEM_WS_SCRIPTS_DIR) / name;
#else
  return fs::path("tests/e2e/streaming") / name;
#endif
}

// upstream.timeout 1s (the exchanges below outlive it), tunnel_idle_timeout 1.5s. One worker.
constexpr std::string_view kConfigTemplate = R"(# rendered by tests/e2e/streaming/upgrade_test.cpp
listen: 127.0.0.1:${PROXY_PORT}
workers: 1
admin: { listen: "127.0.0.1:0" }
${LISTENER_TLS}
upstream:
  url: "${UPSTREAM_ORIGIN}:${UPSTREAM_PORT}"
  connect_timeout: 1s
  timeout: 1s
${UPSTREAM_TLS}
store: { postgres: { dsn: ${PG_DSN}, pool_size: 2, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
defaults: { ttl: 1h, lease: 10s }
routes:
  - name: guarded
    match: { path: /guarded/* }
    scope: { headers: [X-Tenant-Id] }
  - name: optional
    match: { path: /optional/* }
    key: optional
  - name: closed
    match: { path: /closed/* }
    key: off
    upgrades: []
limits: { tunnel_idle_timeout: 1500ms }
)";

constexpr std::string_view kWebSocketOffer =
    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n";

// The last line of a client's output (a line it prints before its result announces a state).
boost::json::object json_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const std::string line = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  boost::system::error_code ec;
  boost::json::value value = boost::json::parse(line, ec);
  if (ec || !value.is_object()) return {};
  return value.as_object();
}

// A time bound in seconds as the plain stage checks it (widened under a sanitizer).
double seconds_bound(std::chrono::milliseconds plain) { return static_cast<double>(time_bound(plain).count()) / 1000; }

double number(const boost::json::object& object, std::string_view name) {
  const auto* value = object.if_contains(name);
  return value != nullptr && value->is_number() ? value->to_number<double>() : -1;
}

struct TlsFiles {
  TempDir directory{"idem-ws-pki"};
  TestPki tool{directory.path()};
  CertificateFiles ca = tool.make_ca("ca");
  CertificateFiles server = tool.issue(ca, "server", "localhost", "DNS:localhost,IP:127.0.0.1", CertificateUse::server);
};

class Upgrades : public ProxyTest {
 protected:
  virtual bool tls() const { return false; }

  ProxyOptions proxy_options() const override {
    if (tls()) files_.emplace();
    std::vector<std::string> args = {script("ws_upstream.py").string()};
    if (tls()) args.insert(args.end(), {"--cert", files_->server.cert.string(), "--key", files_->server.key.string()});
    upstream_.emplace(Process::start(
        ProcessSpec{.executable = kPython, .args = args, .env = {}, .log_dir = logs_.path(), .name = "ws-upstream"}));
    const auto line = upstream_->wait_for_stdout_line("listening 127.0.0.1:", 10s);
    if (!line) throw std::runtime_error("ws_upstream.py did not start:\n" + upstream_->describe());
    upstream_port_ = static_cast<std::uint16_t>(std::stoul(line->substr(line->rfind(':') + 1)));

    ProxyOptions options;
    options.config_template = std::string(kConfigTemplate);
    options.start_upstream = false;
    options.upstream_port = upstream_port_;
    options.variables["LISTENER_TLS"] = "";
    options.variables["UPSTREAM_ORIGIN"] = "http://127.0.0.1";
    options.variables["UPSTREAM_TLS"] = "";
    if (tls()) {
      options.variables["LISTENER_TLS"] = "tls: { cert_file: " + yaml_quoted(files_->server.cert.string()) +
                                          ", key_file: " + yaml_quoted(files_->server.key.string()) + " }";
      options.variables["UPSTREAM_ORIGIN"] = "https://127.0.0.1";
      options.variables["UPSTREAM_TLS"] = "  tls: { ca_file: " + yaml_quoted(files_->ca.cert.string()) + " }";
    }
    return options;
  }

  std::string url(std::string_view path) const {
    return std::string(tls() ? "wss://localhost:" : "ws://127.0.0.1:") +
           std::to_string(const_cast<Upgrades*>(this)->proxy().proxy_port()) + std::string(path);
  }

  // Runs ws_client.py to its end: its JSON line (with "exit" added), its output on failure.
  boost::json::object client(std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
    if (tls()) args.insert(args.end(), {"--ca", files_->ca.cert.string()});
    args.insert(args.begin(), script("ws_client.py").string());
    const RunResult run = run_to_exit(
        ProcessSpec{.executable = kPython, .args = args, .env = {}, .log_dir = logs_.path(), .name = "ws-client"},
        timeout);
    boost::json::object result = json_line(run.stdout_text);
    result["exit"] = run.exit_status.value_or(-1);
    result["output"] = run.stdout_text + run.stderr_text;
    return result;
  }

  // What the upstream counted (its /__stats, asked directly).
  boost::json::object upstream_stats() {
    std::vector<std::string> args = {
        "-c",
        "import json,ssl,sys,urllib.request as u;"
        "c=ssl.create_default_context(cafile=sys.argv[2]) if len(sys.argv)>2 else None;"
        "print(u.urlopen(sys.argv[1],context=c,timeout=5).read().decode())",
        std::string(tls() ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(upstream_port_) + "/__stats"};
    if (tls()) args.push_back(files_->ca.cert.string());
    const RunResult run = run_to_exit(
        ProcessSpec{.executable = kPython, .args = args, .env = {}, .log_dir = logs_.path(), .name = "stats"}, 20s);
    return json_line(run.stdout_text);
  }

  // The last close frame the upstream received from a client: [code, reason].
  std::string last_close_seen_upstream() {
    const boost::json::object stats = upstream_stats();
    const auto* closes = stats.if_contains("closes");
    if (closes == nullptr || !closes->is_array() || closes->as_array().empty()) return "none";
    return boost::json::serialize(closes->as_array().back());
  }

  // One request on a fresh plain connection to the proxy (the refusals need no TLS).
  StreamedResponse raw(std::string_view head, StreamingConnection* keep = nullptr) {
    std::optional<StreamingConnection> own;
    if (keep == nullptr) keep = &own.emplace(proxy().proxy_port());
    if (!keep->send(head)) {
      StreamedResponse failed;
      failed.error = keep->error();
      return failed;
    }
    return keep->read_response(keeping_body());
  }

  mutable TempDir logs_{"idem-ws"};
  mutable std::optional<TlsFiles> files_;
  mutable std::optional<Process> upstream_;
  mutable std::uint16_t upstream_port_ = 0;
};

TEST_F(Upgrades, MessagesFlowBothWaysForLongerThanTheUpstreamTimeout) {
  const auto started = std::chrono::steady_clock::now();
  const boost::json::object exchange =
      client({"exchange", url("/echo"), "--seconds", "3", "--interval-ms", "100", "--size", "1000"});
  EXPECT_EQ(exchange.at("exit").as_int64(), 0) << exchange.at("output");
  EXPECT_GE(number(exchange, "sent"), 10) << exchange.at("output");
  EXPECT_EQ(number(exchange, "echoed"), number(exchange, "sent")) << exchange.at("output");
  EXPECT_GT(std::chrono::steady_clock::now() - started, 3s) << "the tunnel outlived upstream.timeout (1s)";
  // The server pushes unasked too.
  const boost::json::object push = client({"push", url("/push?n=20&ms=100"), "--count", "20"});
  EXPECT_EQ(number(push, "received"), 20) << push.at("output");
}

TEST_F(Upgrades, ACloseFromEitherSideReachesTheOtherAtOnce) {
  // The client closes: its close frame reaches the server, the server's TCP end reaches the client.
  const boost::json::object by_client = client({"exchange", url("/echo"), "--seconds", "0.3"});
  EXPECT_EQ(by_client.at("exit").as_int64(), 0) << by_client.at("output");
  EXPECT_EQ(number(by_client, "close_code"), 1000) << by_client.at("output");
  EXPECT_LT(number(by_client, "close_s"), seconds_bound(1000ms))
      << "the server's close was not passed on: " << by_client.at("output");
  EXPECT_EQ(last_close_seen_upstream(), "[1000,\"client done\"]");

  // The server closes: its close frame and its TCP end reach the client.
  const boost::json::object by_server = client({"server-close", url("/echo")});
  EXPECT_EQ(by_server.at("exit").as_int64(), 0) << by_server.at("output");
  EXPECT_EQ(number(by_server, "close_code"), 4001) << by_server.at("output");
  EXPECT_EQ(by_server.at("close_reason"), "bye") << by_server.at("output");
  EXPECT_LT(number(by_server, "close_s"), seconds_bound(1000ms))
      << "the server's close was not passed on: " << by_server.at("output");
  const std::string log = proxy().proxy_process()->stderr_text();
  EXPECT_NE(log.find("\"event\":\"tunnel_ended\",\"end\":\"closed\""), std::string::npos) << log;
}

TEST_F(Upgrades, AnIdleTunnelIsClosedAtTheIdleTimeout) {
  // idemproxy_active_tunnels, read while the tunnel lives and after.
  const std::uint16_t admin = ops::admin_port_of(*proxy().proxy_process());
  const auto active_tunnels = [&] {
    return ops::metric_value(ops::admin_get(admin, "/metrics").body, "idemproxy_active_tunnels").value_or(-1);
  };
  std::atomic<bool> ended{false};
  std::atomic<int> most_tunnels{0};
  std::thread watcher([&] {
    for (int i = 0; i < 200 && !ended; ++i) {
      most_tunnels = std::max(most_tunnels.load(), static_cast<int>(active_tunnels()));
      std::this_thread::sleep_for(50ms);
    }
  });
  const boost::json::object idle = client({"idle", url("/echo"), "--seconds", "8"});
  ended = true;
  watcher.join();
  EXPECT_EQ(most_tunnels.load(), 1) << "idemproxy_active_tunnels while the tunnel lived";
  EXPECT_EQ(active_tunnels(), 0) << "idemproxy_active_tunnels after the tunnel";
  EXPECT_EQ(idle.at("exit").as_int64(), 0) << idle.at("output");
  const double after = number(idle, "closed_after_s");
  EXPECT_GT(after, 1.3) << idle.at("output");
  EXPECT_LT(after, seconds_bound(3000ms)) << "limits.tunnel_idle_timeout is 1.5s: " << idle.at("output");
  const std::string log = proxy().proxy_process()->stderr_text();
  EXPECT_NE(log.find("\"event\":\"tunnel_ended\",\"end\":\"idle\""), std::string::npos) << log;
}

TEST_F(Upgrades, AnUpstreamDyingMidTunnelEndsTheClientsConnectionAtOnce) {
  // The client waits in an open tunnel (after one echo) while the upstream is killed.
  Process waiting =
      Process::start(ProcessSpec{.executable = kPython,
                                 .args = {script("ws_client.py").string(), "idle", url("/echo"), "--seconds", "8"},
                                 .env = {},
                                 .log_dir = logs_.path(),
                                 .name = "ws-waiting"});
  ASSERT_TRUE(waiting.wait_for_stdout_line("\"echoed\"", 10s)) << waiting.describe();
  upstream_->kill9();
  const std::optional<int> status = waiting.wait_exit(20s);
  ASSERT_TRUE(status) << waiting.describe();
  const boost::json::object seen = json_line(waiting.stdout_text());
  EXPECT_EQ(*status, 0) << waiting.describe();
  // Well before limits.tunnel_idle_timeout (1.5s): the upstream's end was passed on.
  EXPECT_LT(number(seen, "closed_after_s"), seconds_bound(1200ms)) << waiting.stdout_text();
  EXPECT_EQ(number(seen, "close_code"), 1006) << "no close frame came: " << waiting.stdout_text();
  const std::string log = proxy().proxy_process()->stderr_text();
  EXPECT_EQ(log.find("\"event\":\"tunnel_ended\",\"end\":\"idle\""), std::string::npos) << log;
}

TEST_F(Upgrades, AnUpgradeOnAGuardedRequestIsRefused403AndNeverReachesTheUpstream) {
  const std::vector<std::string> heads = {
      "GET /guarded/echo HTTP/1.1\r\nHost: svc\r\n" + std::string(kWebSocketOffer) + "\r\n",
      "GET /optional/echo HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: k1\r\n" + std::string(kWebSocketOffer) + "\r\n",
      "GET /closed/echo HTTP/1.1\r\nHost: svc\r\n" + std::string(kWebSocketOffer) + "\r\n",
  };
  for (const std::string& head : heads) {
    const StreamedResponse response = raw(head);
    EXPECT_EQ(response.status, 403) << head;
    EXPECT_EQ(response.header("Content-Type"), "application/problem+json") << head;
    EXPECT_NE(response.body.find("urn:idemproxy:problem:upgrade-refused"), std::string::npos) << response.body;
    EXPECT_TRUE(response.peer_closed || !response.keep_alive) << head;
  }
  const boost::json::object stats = upstream_stats();
  EXPECT_EQ(number(stats, "requests"), 0) << boost::json::serialize(stats);
  EXPECT_EQ(number(stats, "handshakes"), 0) << boost::json::serialize(stats);
  // The optional route without a key upgrades.
  const boost::json::object keyless = client({"exchange", url("/optional/echo"), "--seconds", "0.2"});
  EXPECT_EQ(keyless.at("exit").as_int64(), 0) << keyless.at("output");
}

TEST_F(Upgrades, AnH2cOfferIsStrippedAndTheRequestAnsweredInHttp11) {
  const StreamedResponse response =
      raw("GET /seen HTTP/1.1\r\nHost: svc\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
          "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n");
  ASSERT_EQ(response.status, 200) << response.error << response.body;
  EXPECT_EQ(response.body, R"({"Upgrade": null, "Connection": null, "HTTP2-Settings": null})");
}

TEST_F(Upgrades, AnAnswerOtherThan101IsStreamedAndTheConnectionServesOn) {
  StreamingConnection connection(proxy().proxy_port());
  // The offer goes upstream with its Upgrade and Connection; this upstream answers 200.
  const StreamedResponse seen =
      raw("GET /seen HTTP/1.1\r\nHost: svc\r\n" + std::string(kWebSocketOffer) + "\r\n", &connection);
  ASSERT_EQ(seen.status, 200) << seen.error;
  EXPECT_TRUE(seen.complete);
  EXPECT_EQ(seen.body, R"({"Upgrade": "websocket", "Connection": "upgrade", "HTTP2-Settings": null})");
  EXPECT_TRUE(seen.keep_alive);
  const StreamedResponse declined =
      raw("GET /not-upgraded HTTP/1.1\r\nHost: svc\r\n" + std::string(kWebSocketOffer) + "\r\n", &connection);
  EXPECT_EQ(declined.status, 200) << declined.error;
  EXPECT_TRUE(declined.complete);
  EXPECT_EQ(declined.body, "not upgraded");
  EXPECT_FALSE(declined.has_header("Upgrade"));
  // The same client connection serves the next request.
  const StreamedResponse next = raw("GET /seen HTTP/1.1\r\nHost: svc\r\n\r\n", &connection);
  EXPECT_EQ(next.status, 200) << next.error;
  EXPECT_EQ(next.body, R"({"Upgrade": null, "Connection": null, "HTTP2-Settings": null})");
}

TEST_F(Upgrades, ProxyMemoryStaysFlatDuringALongTunnel) {
  const int pid = proxy().proxy_process()->pid();
  // Warm up (the first tunnel's allocations), then measure a long one.
  client({"exchange", url("/echo"), "--seconds", "0.2"});
  reset_peak_rss(pid);
  const std::uint64_t before = resident_kib(pid);
  const std::uint64_t mib = 256 / stream_scale();
  const boost::json::object volume =
      client({"volume", url("/echo"), "--mib", std::to_string(mib), "--size", "65536"}, 240s);
  const std::uint64_t peak = peak_resident_kib(pid);
  EXPECT_EQ(volume.at("exit").as_int64(), 0) << volume.at("output");
  EXPECT_EQ(number(volume, "echoed_bytes"), static_cast<double>(mib * 1024 * 1024)) << volume.at("output");
  const std::uint64_t growth = peak > before ? peak - before : 0;
  std::cout << "[ figures ] " << mib << " MiB each way through one tunnel: proxy peak RSS +" << growth << " KiB\n";
  if (memory_bounds_checked()) {
    EXPECT_LT(growth, 8u * 1024) << "KiB of peak RSS growth";
  }
}

class UpgradesOverTls : public Upgrades {
 protected:
  bool tls() const override { return true; }
};

TEST_F(UpgradesOverTls, WebSocketThroughTheTlsListenerToAnHttpsUpstream) {
  const boost::json::object exchange =
      client({"exchange", url("/echo"), "--seconds", "3", "--interval-ms", "100", "--size", "1000"});
  EXPECT_EQ(exchange.at("exit").as_int64(), 0) << exchange.at("output");
  EXPECT_GE(number(exchange, "sent"), 10) << exchange.at("output");
  EXPECT_EQ(number(exchange, "echoed"), number(exchange, "sent"));
  EXPECT_LT(number(exchange, "close_s"), seconds_bound(1000ms))
      << "the server's close was not passed on: " << exchange.at("output");
  EXPECT_EQ(last_close_seen_upstream(), "[1000,\"client done\"]");
  const boost::json::object by_server = client({"server-close", url("/echo")});
  EXPECT_EQ(by_server.at("exit").as_int64(), 0) << by_server.at("output");
  EXPECT_EQ(number(by_server, "close_code"), 4001) << by_server.at("output");
  EXPECT_LT(number(by_server, "close_s"), seconds_bound(1000ms))
      << "the server's close was not passed on: " << by_server.at("output");
  const boost::json::object idle = client({"idle", url("/echo"), "--seconds", "8"});
  EXPECT_GT(number(idle, "closed_after_s"), 1.3) << idle.at("output");
  EXPECT_LT(number(idle, "closed_after_s"), seconds_bound(3000ms)) << idle.at("output");
}

// Bytes either parser read past a head belong to the tunnel: an upstream that writes its 101 and
// a first frame in one write (RawUpstream, tests/support/raw_upstream.hpp), and a client that
// sends its request and what follows it in one write. What follows here is itself a request,
// which the upstream counts and answers: through the tunnel, not parsed by the proxy.
class UpgradeBytes : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = std::string(kConfigTemplate);
    options.start_upstream = false;
    options.upstream_port = upstream_.port();
    options.variables["LISTENER_TLS"] = "";
    options.variables["UPSTREAM_ORIGIN"] = "http://127.0.0.1";
    options.variables["UPSTREAM_TLS"] = "";
    return options;
  }

  // Connects to the proxy, writes `bytes` in one send, reads until the proxy closes (or 5 s pass).
  std::string exchange_raw(const std::string& bytes) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(proxy().proxy_port());
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string got;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
        ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
      const auto deadline = std::chrono::steady_clock::now() + 5s;
      while (std::chrono::steady_clock::now() < deadline) {
        pollfd ready{fd, POLLIN, 0};
        if (::poll(&ready, 1, 200) <= 0) continue;
        char chunk[4096];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) break;
        got.append(chunk, static_cast<std::size_t>(n));
      }
    }
    ::close(fd);
    return got;
  }

  mutable RawUpstream upstream_;
};

TEST_F(UpgradeBytes, BytesReadPastEitherHeadGoThroughTheTunnelFirst) {
  upstream_.script("/switch", {.bytes = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
                                        "Upgrade\r\n\r\nFIRST-FRAME"});
  upstream_.script("/after", {.bytes = "AFTER-REPLY", .close_after = true});
  const std::string got = exchange_raw(
      "GET /switch HTTP/1.1\r\nHost: svc\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
      "GET /after HTTP/1.1\r\nHost: svc\r\n\r\n");
  ASSERT_EQ(got.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("\r\nUpgrade: websocket\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("\r\nConnection: upgrade\r\n"), std::string::npos) << got;
  const std::string after_head = got.substr(got.find("\r\n\r\n") + 4);
  EXPECT_EQ(after_head, "FIRST-FRAMEAFTER-REPLY") << "the upstream's first frame, then the answer to the client's "
                                                     "bytes, then the upstream's close passed on";
  EXPECT_EQ(upstream_.executions("/after"), 1u) << upstream_.received();
}

}  // namespace
}  // namespace idem::test
