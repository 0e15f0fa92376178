// TLS on both sides of the real idemproxy binary, with certificates made at test time by a
// throwaway CA (support/test_pki.hpp): clients get first responses and replays over TLS; plain
// HTTP and old protocol versions on the TLS port get nothing and the proxy keeps serving; an https
// upstream is verified (chain, name) and a failed handshake is a 502 that releases the key; a
// client certificate reaches an upstream that requires one; the listener's certificate is
// rotated live, and a broken replacement is refused without a gap.
#include <signal.h>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "support/env.hpp"
#include "support/eventually.hpp"
#include "support/proxy_launcher.hpp"
#include "support/raw_upstream.hpp"
#include "support/test_pki.hpp"
#include "support/tls_client.hpp"

namespace idem::test::security {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using e2e::order;

constexpr std::chrono::seconds kEventuallyWithin{10};

// One worker, so that the upstream connection pool is one pool (the keep-alive test counts its
// connections). ${LISTENER_TLS} and ${UPSTREAM_TLS} are whole YAML lines or empty.
// The lease is the timing model's shortest for an https upstream, which spends connect_timeout
// twice (TCP, then the TLS handshake): 2 × query 1s + acquire 500ms + 2 × connect 2s + upstream 5s
// + margin 1s = 12.5s, rounded up.
constexpr std::string_view kConfigTemplate = R"(# rendered by tests/security/tls_test.cpp
listen: 127.0.0.1:${PROXY_PORT}
workers: 1
admin: { listen: "127.0.0.1:0" }
${LISTENER_TLS}
upstream:
  url: "${UPSTREAM_ORIGIN}:${UPSTREAM_PORT}"
  connect_timeout: 2s
  timeout: 5s
${UPSTREAM_TLS}
store: { postgres: { dsn: ${PG_DSN}, pool_size: 2, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
defaults: { ttl: 1h, lease: 13s }
routes:
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
  - name: off-route
    match: { path: /plain/* }
    key: off
${LIMITS}
)";

// The certificates every test draws from, made once for the suite.
struct Pki {
  TempDir directory{"idem-tls-pki"};
  TestPki tool{directory.path()};
  CertificateFiles ca = tool.make_ca("ca");
  CertificateFiles other_ca = tool.make_ca("other-ca");
  CertificateFiles server = tool.issue(ca, "server", "localhost", "DNS:localhost,IP:127.0.0.1", CertificateUse::server);
  CertificateFiles renewed =
      tool.issue(ca, "renewed", "localhost-renewed", "DNS:localhost,IP:127.0.0.1", CertificateUse::server);
  CertificateFiles foreign =
      tool.issue(other_ca, "foreign", "localhost", "DNS:localhost,IP:127.0.0.1", CertificateUse::server);
  CertificateFiles client = tool.issue(ca, "client", "idemproxy-client", "", CertificateUse::client);
};

std::string yaml(const fs::path& path) { return yaml_quoted(path.string()); }

std::string listener_tls_line(const fs::path& cert, const fs::path& key, std::string_view min_version = "1.2") {
  return "tls: { cert_file: " + yaml(cert) + ", key_file: " + yaml(key) + ", min_version: \"" +
         std::string(min_version) + "\" }";
}

struct ProxySetup {
  std::string listener_tls;  // a whole `tls:` line, or empty
  std::string upstream_origin = "http://127.0.0.1";
  std::string upstream_tls;                    // the members of upstream.tls, e.g. "ca_file: ...", or empty
  std::optional<std::uint16_t> upstream_port;  // set: an upstream the test started (no fixture upstream)
  std::string limits;                          // a whole `limits:` line, or empty
};

ProxyOptions proxy_options(const ProxySetup& setup) {
  ProxyOptions options;
  options.config_template = std::string(kConfigTemplate);
  options.variables["LISTENER_TLS"] = setup.listener_tls;
  options.variables["UPSTREAM_ORIGIN"] = setup.upstream_origin;
  options.variables["UPSTREAM_TLS"] = setup.upstream_tls.empty() ? "" : "  tls: { " + setup.upstream_tls + " }";
  options.variables["LIMITS"] = setup.limits;
  if (setup.upstream_port) {
    options.start_upstream = false;
    options.upstream_port = *setup.upstream_port;
  }
  return options;
}

// Log lines of one event (JSON lines on the proxy's stderr).
std::vector<boost::json::object> events(const std::string& log, std::string_view event) {
  std::vector<boost::json::object> found;
  std::size_t begin = 0;
  while (begin < log.size()) {
    std::size_t end = log.find('\n', begin);
    if (end == std::string::npos) end = log.size();
    boost::system::error_code ec;
    auto value = boost::json::parse(std::string_view(log).substr(begin, end - begin), ec);
    if (!ec && value.is_object()) {
      const auto* name = value.as_object().if_contains("event");
      if (name != nullptr && name->is_string() && name->as_string() == event)
        found.push_back(std::move(value.as_object()));
    }
    begin = end + 1;
  }
  return found;
}

std::string field(const boost::json::object& object, std::string_view name) {
  const auto* value = object.if_contains(name);
  return value != nullptr && value->is_string() ? std::string(value->as_string()) : std::string();
}

// Replaces `target` in one step (write aside, rename), as a certificate renewal tool would.
void replace_file(const fs::path& target, const std::string& contents) {
  const fs::path aside = target.string() + ".next";
  {
    std::ofstream out(aside, std::ios::binary | std::ios::trunc);
    out << contents;
    if (!out) throw std::runtime_error("cannot write " + aside.string());
  }
  fs::rename(aside, target);
}

TlsClientOptions trusting(const Pki& pki) {
  TlsClientOptions options;
  options.ca_file = pki.ca.cert;
  options.server_name = "localhost";
  return options;
}

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = std::make_unique<Pki>(); }
  static void TearDownTestSuite() { pki_.reset(); }

  void TearDown() override {
    for (auto& harness : harnesses_) {
      harness->stop();
      if (HasFailure()) std::cerr << harness->diagnostics();
    }
    for (auto& upstream : upstreams_) {
      upstream.process.terminate(std::chrono::seconds(5));
      if (HasFailure()) std::cerr << "=== tls upstream ===\n" << upstream.process.describe(4096) << "\n";
    }
  }

  ProxyHarness& start_proxy(const ProxySetup& setup) {
    harnesses_.push_back(std::make_unique<ProxyHarness>(proxy_options(setup)));
    harnesses_.back()->start();
    return *harnesses_.back();
  }

  TestUpstream& start_tls_upstream(const CertificateFiles& certificate, const fs::path& client_ca = {}) {
    upstreams_.push_back(
        start_test_upstream_tls(upstream_logs_.path(), TestUpstreamTls{certificate.cert, certificate.key, client_ca}));
    return upstreams_.back();
  }

  // An https upstream through `localhost` (SNI and name checked), trusting `ca`.
  static ProxySetup https_upstream(const TestUpstream& upstream, const fs::path& ca, std::string extra = {}) {
    ProxySetup setup;
    setup.upstream_origin = "https://localhost";
    setup.upstream_port = upstream.tls_port;
    setup.upstream_tls = "ca_file: " + yaml(ca) + (extra.empty() ? "" : ", " + extra);
    return setup;
  }

  static const Pki& pki() { return *pki_; }

 private:
  static inline std::unique_ptr<Pki> pki_;
  TempDir upstream_logs_{"idem-tls-upstream"};
  std::vector<TestUpstream> upstreams_;
  std::vector<std::unique_ptr<ProxyHarness>> harnesses_;
};

// (a) First response and replay over a TLS listener, on one keep-alive connection and on a new
// one; the upstream executed once and was told the client used https.
TEST_F(Tls, ClientGetsResponseAndReplayOverTls) {
  ProxySetup setup;
  setup.listener_tls = listener_tls_line(pki().server.cert, pki().server.key);
  ProxyHarness& proxy = start_proxy(setup);
  const std::string key = unique_key("tls-replay");

  TlsConnection connection(proxy.proxy_port(), trusting(pki()));
  const TlsHandshake& handshake = connection.handshake();
  ASSERT_TRUE(handshake.ok()) << handshake.error;
  EXPECT_EQ(handshake.peer_serial, pki().server.serial);
  EXPECT_EQ(handshake.alpn, "http/1.1");
  EXPECT_EQ(handshake.protocol, "TLSv1.3");

  const HttpResponse first = connection.send(order(key));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_FALSE(e2e::is_replay(first));
  EXPECT_EQ(e2e::string_member(e2e::upstream_json(first), "x_forwarded_proto"), "https") << first.body;

  const HttpResponse same_connection = connection.send(order(key));
  ASSERT_TRUE(same_connection.ok()) << same_connection.error;
  EXPECT_TRUE(e2e::is_replay(same_connection)) << describe(same_connection);
  EXPECT_EQ(same_connection.body, first.body);
  EXPECT_TRUE(connection.is_open());

  const HttpResponse new_connection = tls_send(proxy.proxy_port(), order(key), trusting(pki()));
  ASSERT_TRUE(new_connection.ok()) << new_connection.error;
  EXPECT_EQ(new_connection.status, 200) << describe(new_connection);
  EXPECT_TRUE(e2e::is_replay(new_connection)) << describe(new_connection);
  EXPECT_EQ(new_connection.body, first.body);
  e2e::expect_same_stored_response(first, new_connection);
  EXPECT_EQ(proxy.upstream_count(key), 1u);
}

// (b) Plain HTTP on the TLS port gets no HTTP answer; a TLS 1.1 client is refused by the server
// (its alert, not a local failure); meanwhile TLS clients are served.
TEST_F(Tls, PlaintextAndOldProtocolVersionsAreRefused) {
  ProxySetup setup;
  setup.listener_tls = listener_tls_line(pki().server.cert, pki().server.key);
  ProxyHarness& proxy = start_proxy(setup);

  const RawExchange plain = raw_exchange(proxy.proxy_port(), "GET /plain/ping HTTP/1.1\r\nHost: localhost\r\n\r\n", 5s);
  EXPECT_TRUE(plain.error.empty()) << plain.error;
  EXPECT_FALSE(plain.timed_out) << "the proxy kept a plaintext client's connection open";
  EXPECT_EQ(plain.received.find("HTTP/"), std::string::npos) << plain.received;

  TlsClientOptions outdated = trusting(pki());
  outdated.max_protocol = TlsProtocol::v1_1;
  const TlsHandshake refused = tls_handshake(proxy.proxy_port(), outdated);
  EXPECT_FALSE(refused.ok()) << "a TLS 1.1 handshake succeeded: " << refused.protocol;
  EXPECT_NE(refused.error.find("protocol version"), std::string::npos) << refused.error;

  TlsClientOptions tls12 = trusting(pki());
  tls12.max_protocol = TlsProtocol::v1_2;
  const TlsHandshake accepted = tls_handshake(proxy.proxy_port(), tls12);
  ASSERT_TRUE(accepted.ok()) << accepted.error;
  EXPECT_EQ(accepted.protocol, "TLSv1.2");

  const HttpResponse served = tls_send(proxy.proxy_port(), HttpRequest::get("/plain/ping"), trusting(pki()));
  ASSERT_TRUE(served.ok()) << served.error;
  EXPECT_EQ(served.status, 200) << describe(served);
  EXPECT_GE(events(proxy.proxy_process()->stderr_text(), "tls_handshake_failed").size(), 2u);
}

// A request the proxy refuses before reading it whole is answered over TLS too (then the
// connection is closed), and the proxy goes on serving.
TEST_F(Tls, OversizedBodyOverTlsGets413) {
  ProxySetup setup;
  setup.listener_tls = listener_tls_line(pki().server.cert, pki().server.key);
  setup.limits = "limits: { max_request_body: 1KiB }";
  ProxyHarness& proxy = start_proxy(setup);

  TlsConnection connection(proxy.proxy_port(), trusting(pki()));
  const HttpResponse refused = connection.send(order(unique_key("tls-413"), std::string(64 * 1024, 'x')));
  e2e::expect_problem(refused, 413, "request-too-large");
  EXPECT_FALSE(connection.is_open());
  EXPECT_EQ(proxy.upstream_total(), 0u);
  const HttpResponse served = tls_send(proxy.proxy_port(), HttpRequest::get("/plain/after-413"), trusting(pki()));
  EXPECT_EQ(served.status, 200) << describe(served);
}

// (b) min_version: "1.3" refuses a TLS 1.2 client and serves a TLS 1.3 one.
TEST_F(Tls, MinimumVersionComesFromTheConfig) {
  ProxySetup setup;
  setup.listener_tls = listener_tls_line(pki().server.cert, pki().server.key, "1.3");
  ProxyHarness& proxy = start_proxy(setup);

  TlsClientOptions tls12 = trusting(pki());
  tls12.max_protocol = TlsProtocol::v1_2;
  const TlsHandshake refused = tls_handshake(proxy.proxy_port(), tls12);
  EXPECT_FALSE(refused.ok()) << "a TLS 1.2 handshake succeeded against min_version 1.3";
  EXPECT_NE(refused.error.find("protocol version"), std::string::npos) << refused.error;

  const HttpResponse served = tls_send(proxy.proxy_port(), HttpRequest::get("/plain/ping"), trusting(pki()));
  ASSERT_TRUE(served.ok()) << served.error;
  EXPECT_EQ(served.status, 200) << describe(served);
}

// (c) An https upstream verified against the configured CA, reached by name (SNI): the request
// executes once, replays, and the pooled TLS connection is reused.
TEST_F(Tls, VerifiedHttpsUpstreamServesAndReplaysOverOnePooledConnection) {
  TestUpstream& upstream = start_tls_upstream(pki().server);
  ProxyHarness& proxy = start_proxy(https_upstream(upstream, pki().ca.cert));
  const std::string key = unique_key("https-upstream");

  const HttpResponse first = send(proxy.proxy_port(), order(key));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  const HttpResponse replay = send(proxy.proxy_port(), order(key));
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(e2e::is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  for (int i = 0; i < 4; ++i) {
    const HttpResponse plain = send(proxy.proxy_port(), HttpRequest::get("/plain/ping"));
    ASSERT_EQ(plain.status, 200) << describe(plain);
  }
  EXPECT_EQ(upstream_count_for_key(upstream.port, key), 1u);
  EXPECT_EQ(upstream_total(upstream.port), 5u);
  EXPECT_EQ(upstream_tls_connections(upstream.port), 1u) << "the TLS upstream connection was not kept alive";
}

// (c) An upstream addressed by IP literal: no SNI (not allowed for addresses), and the certificate
// must carry that address as an IP SAN; the same certificate is refused for an address it lacks.
TEST_F(Tls, UpstreamAddressedByIpIsVerifiedAgainstItsIpSan) {
  TestUpstream& upstream = start_tls_upstream(pki().server);
  ProxySetup by_address = https_upstream(upstream, pki().ca.cert);
  by_address.upstream_origin = "https://127.0.0.1";
  ProxyHarness& proxy = start_proxy(by_address);
  const HttpResponse served = send(proxy.proxy_port(), HttpRequest::get("/plain/by-address"));
  EXPECT_EQ(served.status, 200) << describe(served);
  proxy.stop();

  ProxyHarness& wrong = start_proxy(https_upstream(upstream, pki().ca.cert, "server_name: \"127.0.0.2\""));
  e2e::expect_problem(send(wrong.proxy_port(), HttpRequest::get("/plain/by-address")), 502, "upstream-tls-failed");
  const auto failures = events(wrong.proxy_process()->stderr_text(), "upstream_tls_failed");
  ASSERT_FALSE(failures.empty()) << wrong.proxy_process()->stderr_text();
  EXPECT_EQ(field(failures.front(), "reason"), "certificate verify failed: IP address mismatch");
  EXPECT_EQ(upstream_total(upstream.port), 1u);
}

// (c) Bytes a TLS upstream sends after a complete response, in a record of its own that arrives
// in one read with the response's last record, wait inside the proxy's TLS layer, where a peek at
// the socket before reusing the connection cannot see them: the connection is not reused, so they
// never become the next request's answer. (The same record: they wait in the proxy's read buffer,
// which was checked already.) Each next request gets its own answer, executed once.
TEST_F(Tls, BytesATlsUpstreamSendsAfterItsResponseNeverAnswerTheNextRequest) {
  RawUpstream raw(RawUpstream::Tls{pki().server.cert, pki().server.key});
  const std::string answered = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst";
  const std::string forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged";
  raw.script("/plain/own-record", RawUpstream::Reply{.bytes = answered, .trailing_bytes = forged});
  raw.script("/plain/same-record", RawUpstream::Reply{.bytes = answered + forged});
  raw.script("/plain/next", RawUpstream::Reply{.bytes = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal"});
  ProxySetup setup;
  setup.upstream_origin = "https://localhost";
  setup.upstream_port = raw.port();
  setup.upstream_tls = "ca_file: " + yaml(pki().ca.cert);
  ProxyHarness& proxy = start_proxy(setup);

  for (const std::string target : {"/plain/own-record", "/plain/same-record"}) {
    SCOPED_TRACE(target);
    const HttpResponse first = send(proxy.proxy_port(), HttpRequest::get(target));
    ASSERT_EQ(first.status, 200) << describe(first);
    EXPECT_EQ(first.body, "first");
    for (int i = 0; i < 3; ++i) {
      const HttpResponse next = send(proxy.proxy_port(), HttpRequest::get("/plain/next"));
      EXPECT_EQ(next.status, 200) << describe(next);
      EXPECT_EQ(next.body, "real") << "bytes sent after an earlier response answered this request";
    }
    EXPECT_EQ(raw.executions(target), 1u);
  }
  EXPECT_EQ(raw.executions("/plain/next"), 6u);
  // The others were kept alive: one connection that ended with each stray answer, and one reused
  // by the three next requests after the first (the second stray answer came on that one).
  EXPECT_EQ(raw.connections(), 3u);
}

// (d) An upstream certificate from a CA the proxy does not trust: 502 upstream-tls-failed, the
// verify reason in the log, no execution, and the key released: once the proxy trusts that CA
// (a restart with the fixed config) the same key executes.
TEST_F(Tls, UntrustedUpstreamCertificateIs502AndReleasesTheKey) {
  TestUpstream& upstream = start_tls_upstream(pki().foreign);
  ProxyHarness& proxy = start_proxy(https_upstream(upstream, pki().ca.cert));
  const std::string key = unique_key("untrusted-upstream");

  const HttpResponse refused = send(proxy.proxy_port(), order(key));
  e2e::expect_problem(refused, 502, "upstream-tls-failed");
  EXPECT_EQ(upstream_total(upstream.port), 0u);
  const auto failures = events(proxy.proxy_process()->stderr_text(), "upstream_tls_failed");
  ASSERT_FALSE(failures.empty()) << proxy.proxy_process()->stderr_text();
  EXPECT_EQ(field(failures.front(), "reason"), "certificate verify failed: unable to get local issuer certificate")
      << boost::json::serialize(failures.front());
  EXPECT_EQ(field(failures.front(), "server_name"), "localhost");
  proxy.stop();

  ProxyHarness& fixed = start_proxy(https_upstream(upstream, pki().other_ca.cert));
  const HttpResponse retried = send(fixed.proxy_port(), order(key));
  ASSERT_TRUE(retried.ok()) << retried.error;
  EXPECT_EQ(retried.status, 200) << describe(retried);
  EXPECT_FALSE(e2e::is_replay(retried));
  EXPECT_EQ(upstream_count_for_key(upstream.port, key), 1u);
}

// (d) A trusted certificate for another name: "hostname mismatch", 502, nothing executed.
TEST_F(Tls, UpstreamNameMismatchIs502) {
  TestUpstream& upstream = start_tls_upstream(pki().server);
  ProxyHarness& proxy = start_proxy(https_upstream(upstream, pki().ca.cert, "server_name: orders.internal"));
  const std::string key = unique_key("name-mismatch");

  e2e::expect_problem(send(proxy.proxy_port(), order(key)), 502, "upstream-tls-failed");
  EXPECT_EQ(upstream_total(upstream.port), 0u);
  const auto failures = events(proxy.proxy_process()->stderr_text(), "upstream_tls_failed");
  ASSERT_FALSE(failures.empty()) << proxy.proxy_process()->stderr_text();
  EXPECT_EQ(field(failures.front(), "reason"), "certificate verify failed: hostname mismatch");
  EXPECT_EQ(field(failures.front(), "server_name"), "orders.internal");
}

// (d) An https upstream that takes the connection and never answers the handshake: 502
// upstream-tls-failed once the handshake's own connect_timeout (2 s) passed, "timed out" in the log.
TEST_F(Tls, SilentHttpsUpstreamIs502AfterTheHandshakesConnectTimeout) {
  // Listening, never accepting: the kernel completes the TCP handshake, nothing reads the TLS one.
  boost::asio::io_context io;
  const boost::asio::ip::tcp::acceptor silent(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  ProxySetup setup;
  setup.upstream_origin = "https://localhost";
  setup.upstream_port = silent.local_endpoint().port();
  setup.upstream_tls = "ca_file: " + yaml(pki().ca.cert);
  ProxyHarness& proxy = start_proxy(setup);

  const auto started = std::chrono::steady_clock::now();
  e2e::expect_problem(send(proxy.proxy_port(), order(unique_key("silent-upstream"))), 502, "upstream-tls-failed");
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_GE(elapsed, 1900ms);
  EXPECT_LT(elapsed, 4s);
  const auto failures = events(proxy.proxy_process()->stderr_text(), "upstream_tls_failed");
  ASSERT_FALSE(failures.empty()) << proxy.proxy_process()->stderr_text();
  EXPECT_EQ(field(failures.front(), "reason"), "timed out");
}

// (e) An upstream that requires a client certificate: without one the proxy gets 502 and the key
// is released (TLS 1.3 reports the refusal only after the request was written: it must still
// count as "nothing executed"); with one configured the upstream sees the proxy's certificate.
TEST_F(Tls, ClientCertificateIsPresentedToAnUpstreamThatRequiresOne) {
  TestUpstream& upstream = start_tls_upstream(pki().server, pki().ca.cert);
  ProxyHarness& anonymous = start_proxy(https_upstream(upstream, pki().ca.cert));
  const std::string key = unique_key("client-cert");

  e2e::expect_problem(send(anonymous.proxy_port(), order(key)), 502, "upstream-tls-failed");
  EXPECT_EQ(upstream_total(upstream.port), 0u);
  const auto failures = events(anonymous.proxy_process()->stderr_text(), "upstream_tls_failed");
  ASSERT_FALSE(failures.empty()) << anonymous.proxy_process()->stderr_text();
  EXPECT_NE(field(failures.front(), "reason").find("certificate required"), std::string::npos)
      << boost::json::serialize(failures.front());
  anonymous.stop();

  ProxyHarness& authenticated = start_proxy(https_upstream(
      upstream, pki().ca.cert, "cert_file: " + yaml(pki().client.cert) + ", key_file: " + yaml(pki().client.key)));
  const HttpResponse response = send(authenticated.proxy_port(), order(key));
  ASSERT_TRUE(response.ok()) << response.error;
  ASSERT_EQ(response.status, 200) << describe(response);
  EXPECT_EQ(e2e::string_member(e2e::upstream_json(response), "client_cert_subject"),
            "CN=idemproxy-client,O=idemproxy tests")
      << response.body;
  EXPECT_EQ(upstream_count_for_key(upstream.port, key), 1u);
}

// (f) Rotation: the files are replaced and SIGHUP sent; new connections get the new certificate,
// an open connection keeps working; a garbage replacement is rejected and the last good
// certificate stays in service.
TEST_F(Tls, CertificateRotationIsLiveAndABrokenReplacementIsRejected) {
  const fs::path cert = pki().directory.path() / "rotating.pem";
  const fs::path key = pki().directory.path() / "rotating.key";
  fs::copy_file(pki().server.cert, cert, fs::copy_options::overwrite_existing);
  fs::copy_file(pki().server.key, key, fs::copy_options::overwrite_existing);
  ProxySetup setup;
  setup.listener_tls = listener_tls_line(cert, key);
  ProxyHarness& proxy = start_proxy(setup);
  Process& process = *proxy.proxy_process();
  const auto serial_served = [&] { return tls_handshake(proxy.proxy_port(), trusting(pki())).peer_serial; };

  TlsConnection opened_before(proxy.proxy_port(), trusting(pki()));
  ASSERT_EQ(opened_before.handshake().peer_serial, pki().server.serial) << opened_before.handshake().error;
  ASSERT_EQ(opened_before.send(HttpRequest::get("/plain/before")).status, 200);

  replace_file(key, read_file(pki().renewed.key));
  replace_file(cert, read_file(pki().renewed.cert));
  ASSERT_TRUE(process.signal(SIGHUP));
  EXPECT_TRUE(eventually([&] { return serial_served() == pki().renewed.serial; }, kEventuallyWithin))
      << "still serving " << serial_served() << "\n"
      << process.stderr_text();
  const TlsHandshake renewed = tls_handshake(proxy.proxy_port(), trusting(pki()));
  EXPECT_EQ(renewed.peer_subject, "CN=localhost-renewed,O=idemproxy tests");
  const HttpResponse on_old_connection = opened_before.send(HttpRequest::get("/plain/after"));
  ASSERT_TRUE(on_old_connection.ok()) << on_old_connection.error;
  EXPECT_EQ(on_old_connection.status, 200);

  const std::size_t rejected_before = events(process.stderr_text(), "reload_rejected").size();
  replace_file(cert, "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n");
  ASSERT_TRUE(process.signal(SIGHUP));
  EXPECT_TRUE(eventually([&] { return events(process.stderr_text(), "reload_rejected").size() > rejected_before; },
                         kEventuallyWithin))
      << process.stderr_text();
  bool issue_names_the_file = false;
  for (const auto& issue : events(process.stderr_text(), "config_issue")) {
    issue_names_the_file = issue_names_the_file || field(issue, "issue").find("tls.cert_file") != std::string::npos;
  }
  EXPECT_TRUE(issue_names_the_file) << process.stderr_text();
  EXPECT_EQ(serial_served(), pki().renewed.serial);
  const HttpResponse served = tls_send(proxy.proxy_port(), HttpRequest::get("/plain/still"), trusting(pki()));
  EXPECT_EQ(served.status, 200) << describe(served);
}

// (f) A renewal that only rewrites the certificate files (no signal, config file untouched, as
// cert-manager does) is picked up by the file watch.
TEST_F(Tls, RenewedCertificateFilesArePickedUpWithoutASignal) {
  const fs::path cert = pki().directory.path() / "watched.pem";
  const fs::path key = pki().directory.path() / "watched.key";
  fs::copy_file(pki().server.cert, cert, fs::copy_options::overwrite_existing);
  fs::copy_file(pki().server.key, key, fs::copy_options::overwrite_existing);
  ProxySetup setup;
  setup.listener_tls = listener_tls_line(cert, key);
  ProxyHarness& proxy = start_proxy(setup);
  ASSERT_EQ(tls_handshake(proxy.proxy_port(), trusting(pki())).peer_serial, pki().server.serial);

  replace_file(key, read_file(pki().renewed.key));
  replace_file(cert, read_file(pki().renewed.cert));
  EXPECT_TRUE(
      eventually([&] { return tls_handshake(proxy.proxy_port(), trusting(pki())).peer_serial == pki().renewed.serial; },
                 kEventuallyWithin))
      << proxy.proxy_process()->stderr_text();
  bool watched = false;
  for (const auto& reloaded : events(proxy.proxy_process()->stderr_text(), "reloaded")) {
    watched = watched || field(reloaded, "trigger") == "tls_files_changed";
  }
  EXPECT_TRUE(watched) << proxy.proxy_process()->stderr_text();
}

// A broken certificate or a key of another certificate: `--check` and start-up both fail with
// exit code 1 and say which file is wrong.
TEST_F(Tls, BrokenCertificateOrMismatchedKeyFailsCheckAndStartup) {
  TempDir work("idem-tls-broken");
  const fs::path garbage = work.path() / "garbage.pem";
  replace_file(garbage, "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n");
  struct Case {
    std::string name;
    std::string tls_line;
    std::string expected;
  };
  const std::vector<Case> cases{
      {"garbage", listener_tls_line(garbage, pki().server.key), "tls.cert_file"},
      {"mismatch", listener_tls_line(pki().server.cert, pki().renewed.key), "does not belong to the certificate"},
  };
  for (const auto& broken : cases) {
    SCOPED_TRACE(broken.name);
    std::map<std::string, std::string> variables{{"PROXY_PORT", "1"},
                                                 {"UPSTREAM_PORT", "2"},
                                                 {"PG_DSN", yaml_quoted(pg_dsn())},
                                                 {"LISTENER_TLS", broken.tls_line},
                                                 {"UPSTREAM_ORIGIN", "http://127.0.0.1"},
                                                 {"UPSTREAM_TLS", ""},
                                                 {"LIMITS", ""}};
    ProxyLauncher launcher(work.path());
    launcher.write_config(kConfigTemplate, variables, broken.name + ".yaml");

    const RunResult check = launcher.run({"--check"}, broken.name + "-check", 20s);
    EXPECT_EQ(check.exit_status, 1) << check.stdout_text << check.stderr_text;
    EXPECT_NE(check.stderr_text.find(broken.expected), std::string::npos) << check.stderr_text;

    const RunResult run = launcher.run({}, broken.name + "-run", 20s);
    EXPECT_EQ(run.exit_status, 1) << run.stderr_text;
    const auto failed = events(run.stderr_text, "startup_failed");
    ASSERT_EQ(failed.size(), 1u) << run.stderr_text;
    EXPECT_NE(field(failed.front(), "error").find(broken.expected), std::string::npos) << run.stderr_text;
  }
}

}  // namespace
}  // namespace idem::test::security
