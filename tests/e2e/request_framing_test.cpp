// The request validator end to end (core/request_framing.hpp): heads that RFC 9112 says to refuse,
// sent as raw bytes. Each is answered 400 (501 for a transfer coding the proxy does not
// implement) with problem+json, the connection is closed, nothing reaches the upstream (not one
// byte through the capturing proxy in front of it, and its own counter says 0), and a
// well-formed request is served afterwards. The published smuggling classes are here: CL.TE,
// TE.CL, TE.TE obfuscations, malformed Content-Length values. Accepted heads are checked against
// the exact bytes the upstream received.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/e2e_support.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"

namespace idem::test::e2e {
namespace {

struct RawCase {
  std::string name;
  std::string bytes;  // the whole request as sent
  int status = 400;
};

// POST /plain/x is a pass-through route (key: off): a head let through would reach the upstream.
std::string post_plain(const std::string& fields, const std::string& body) {
  return "POST /plain/x HTTP/1.1\r\nHost: svc\r\n" + fields + "\r\n" + body;
}

// An accepted request and the exact bytes the upstream must receive for it.
struct ForwardedCase {
  std::string name;
  std::string sent;
  std::string forwarded;
  std::string response_start = "HTTP/1.1 200 ";
};

// A route for an upstream that routes case-insensitively and ignores a trailing slash.
constexpr std::string_view kLooseRoute =
    "  - name: loose\n"
    "    match: { method: POST, path: /loose, case_insensitive: true, trailing_slash: true }\n";

class RequestFraming : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    std::string text(default_config_template());
    text.insert(text.find("limits:"), kLooseRoute);
    options.config_template = std::move(text);
    // Every byte the proxy sends the upstream passes through the capture.
    options.route_upstream = [this](std::uint16_t upstream_port) {
      capture_ = std::make_unique<FaultProxy>("127.0.0.1", upstream_port);
      return capture_->port();
    };
    return options;
  }

  // What the upstream received since the last call (it reads each request whole before it answers).
  std::string take_captured() {
    std::string captured = capture_->forwarded_to_server();
    capture_->clear_forwarded();
    return captured;
  }

  // Sends a case's request (it ends the connection) and expects the upstream to have received
  // exactly its forwarded bytes, and the client a response starting as it says, then the close.
  void expect_forwarded(const ForwardedCase& forwarded) {
    SCOPED_TRACE(forwarded.name);
    take_captured();
    const RawExchange exchange = raw_exchange(proxy().proxy_port(), forwarded.sent, std::chrono::seconds(5));
    ASSERT_TRUE(exchange.error.empty()) << exchange.error;
    EXPECT_TRUE(exchange.received.starts_with(forwarded.response_start)) << exchange.received.substr(0, 300);
    EXPECT_TRUE(exchange.peer_closed && !exchange.timed_out) << "the connection was not closed as the request asked";
    EXPECT_EQ(take_captured(), forwarded.forwarded);
  }

  void expect_refused(const RawCase& raw) {
    SCOPED_TRACE(raw.name);
    take_captured();
    const std::uint64_t executed_before = upstream_total();
    const RawExchange exchange = raw_exchange(proxy().proxy_port(), raw.bytes, std::chrono::seconds(5));
    ASSERT_TRUE(exchange.error.empty()) << exchange.error;
    // "HTTP/1.1 400 " (or 1.0 for an HTTP/1.0 request).
    EXPECT_TRUE(exchange.received.starts_with("HTTP/1.")) << exchange.received.substr(0, 300);
    EXPECT_EQ(exchange.received.substr(8, 5), " " + std::to_string(raw.status) + " ") << exchange.received.substr(0, 300);
    EXPECT_NE(exchange.received.find("application/problem+json"), std::string::npos) << exchange.received.substr(0, 300);
    EXPECT_TRUE(exchange.peer_closed) << "the connection was left open after a framing refusal";
    // Exactly one response: whatever followed the refused head was never read as a request.
    const std::size_t head_end = exchange.received.find("\r\n\r\n");
    const std::size_t length_at = exchange.received.find("Content-Length: ");
    ASSERT_NE(head_end, std::string::npos) << exchange.received;
    ASSERT_LT(length_at, head_end) << exchange.received;
    const std::size_t length = std::stoul(exchange.received.substr(length_at + 16));
    EXPECT_EQ(exchange.received.size(), head_end + 4 + length) << "more than one response:\n" << exchange.received;
    EXPECT_EQ(upstream_total(), executed_before) << "a refused request reached the upstream";
    EXPECT_EQ(capture_->forwarded_to_server(), "") << "bytes of a refused request reached the upstream";
  }

  void expect_served_afterwards() {
    const HttpResponse response = send(order(unique_key("after-framing")));
    ASSERT_TRUE(response.ok()) << response.error;
    EXPECT_EQ(response.status, 200) << describe(response);
  }

  void run(const std::vector<RawCase>& cases) {
    for (const RawCase& raw : cases) expect_refused(raw);
    expect_served_afterwards();
  }

  mutable std::unique_ptr<FaultProxy> capture_;  // made when the harness knows the upstream's port
};

// The second request a disagreeing parser would see hidden in the body.
const std::string kSmuggled = "GET /plain/smuggled HTTP/1.1\r\nHost: svc\r\n\r\n";

TEST_F(RequestFraming, TransferCodingsOtherThanAFinalSingleChunkedAreRefused) {
  const std::string chunked_body = "5\r\nhello\r\n0\r\n\r\n";
  run({
      {"chunked, identity (chunked not final)", post_plain("Transfer-Encoding: chunked, identity\r\n", chunked_body + kSmuggled), 400},
      {"chunked then gzip on two lines", post_plain("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", chunked_body), 400},
      {"chunked twice on one line", post_plain("Transfer-Encoding: chunked, chunked\r\n", chunked_body), 400},
      {"chunked on two lines", post_plain("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", chunked_body), 400},
      {"xchunked", post_plain("Transfer-Encoding: xchunked\r\nContent-Length: 5\r\n", "hello"), 400},
      {"unknown coding with Content-Length", post_plain("Transfer-Encoding: foo\r\n", "5\r\nhello\r\n0\r\n\r\n"), 501},
      {"gzip, chunked", post_plain("Transfer-Encoding: gzip, chunked\r\n", chunked_body), 501},
      {"vertical tab before chunked", post_plain("Transfer-Encoding: \x0b" "chunked\r\n", chunked_body), 400},
      {"chunked with a parameter", post_plain("Transfer-Encoding: chunked;x=1\r\n", chunked_body), 400},
      {"empty Transfer-Encoding", post_plain("Transfer-Encoding: \r\nContent-Length: 5\r\n", "hello"), 400},
      {"Transfer-Encoding in HTTP/1.0", "POST /plain/x HTTP/1.0\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_body, 400},
  });
}

TEST_F(RequestFraming, ContentLengthAndTransferEncodingTogetherAreRefusedEitherOrder) {
  run({
      {"CL.TE", post_plain("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\nG"), 400},
      {"TE.CL", post_plain("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", "8\r\nSMUGGLED\r\n0\r\n\r\n"), 400},
      {"TE with mixed case and CL", post_plain("Transfer-Encoding: ChUnKeD\r\nContent-Length: 3\r\n", "0\r\n\r\n"), 400},
  });
}

TEST_F(RequestFraming, ContentLengthMustBeOneDecimalValue) {
  run({
      {"3, 3", post_plain("Content-Length: 3, 3\r\n", "abc"), 400},
      {"+3", post_plain("Content-Length: +3\r\n", "abc"), 400},
      {"-1", post_plain("Content-Length: -1\r\n", ""), 400},
      {"empty", post_plain("Content-Length: \r\n", ""), 400},
      {"hex", post_plain("Content-Length: 0x3\r\n", "abc"), 400},
      {"two different lines", post_plain("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd"), 400},
      {"two equal lines", post_plain("Content-Length: 3\r\nContent-Length: 3\r\n", "abc"), 400},
  });
}

TEST_F(RequestFraming, Http11NeedsExactlyOneValidHost) {
  run({
      {"no Host", "POST /plain/x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 400},
      {"two Host lines", "POST /plain/x HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 0\r\n\r\n", 400},
      {"Host with a path", "POST /plain/x HTTP/1.1\r\nHost: a/b\r\nContent-Length: 0\r\n\r\n", 400},
      {"Host with user info", "POST /plain/x HTTP/1.1\r\nHost: u@a\r\nContent-Length: 0\r\n\r\n", 400},
      {"Host with a bad port", "POST /plain/x HTTP/1.1\r\nHost: a:8x\r\nContent-Length: 0\r\n\r\n", 400},
      {"Host list", "POST /plain/x HTTP/1.1\r\nHost: a, b\r\nContent-Length: 0\r\n\r\n", 400},
  });
}

TEST_F(RequestFraming, ControlCharactersTraceContentAndBadChunksAreRefused) {
  run({
      {"control character in a value", post_plain("X-Note: a\x01" "b\r\nContent-Length: 0\r\n", ""), 400},
      {"TRACE with content", "TRACE /plain/x HTTP/1.1\r\nHost: svc\r\nContent-Length: 5\r\n\r\nhello", 400},
      {"TRACE chunked", "TRACE /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
      {"chunk size that overflows", post_plain("Transfer-Encoding: chunked\r\n", "ffffffffffffffffffff\r\nx\r\n0\r\n\r\n"), 400},
      {"chunk size that is not hex", post_plain("Transfer-Encoding: chunked\r\n", "zz\r\nx\r\n0\r\n\r\n"), 400},
  });
}

// Trailer fields of a chunked request are never forwarded: a front proxy that checked the head
// never saw them.
TEST_F(RequestFraming, ChunkedRequestTrailersAreNotForwarded) {
  const std::string bytes =
      "POST /plain/echo HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\nX-Test-Echo-Headers: 1\r\n"
      "Connection: close\r\n\r\n5\r\nhello\r\n0\r\nX-Smuggled-Authorization: Bearer stolen\r\n\r\n";
  const RawExchange exchange = raw_exchange(proxy().proxy_port(), bytes, std::chrono::seconds(5));
  ASSERT_TRUE(exchange.error.empty()) << exchange.error;
  EXPECT_TRUE(exchange.received.starts_with("HTTP/1.1 200 ")) << exchange.received.substr(0, 300);
  EXPECT_NE(exchange.received.find("X-Test-Echo-Headers"), std::string::npos) << exchange.received;
  EXPECT_EQ(exchange.received.find("X-Smuggled-Authorization"), std::string::npos) << exchange.received;
  EXPECT_EQ(upstream_total(), 1u);
}

// A TRACE without content and the accepted spellings (OWS, case) still pass.
TEST_F(RequestFraming, WellFormedVariantsAreServed) {
  const std::vector<std::string> accepted = {
      "TRACE /plain/x HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n",
      "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding:  Chunked \t\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "POST /plain/x HTTP/1.1\r\nHost: svc:8080\r\nContent-Length: 05\r\nConnection: close\r\n\r\nhello",
      "POST /plain/x HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
      "POST /plain/x HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
  };
  for (const std::string& bytes : accepted) {
    const RawExchange exchange = raw_exchange(proxy().proxy_port(), bytes, std::chrono::seconds(5));
    ASSERT_TRUE(exchange.error.empty()) << exchange.error;
    EXPECT_TRUE(exchange.received.starts_with("HTTP/1.")) << bytes << "\n" << exchange.received.substr(0, 300);
    EXPECT_NE(exchange.received.substr(9, 3), "400") << bytes << "\n" << exchange.received.substr(0, 300);
  }
  EXPECT_EQ(upstream_total(), accepted.size());
}

// What the upstream receives for an accepted request to the pass-through route: the client's
// end-to-end fields in order, then this hop's X-Forwarded-Proto and X-Forwarded-For, then the
// body's length, its digits as read.
std::string forwarded_post(const std::string& target, const std::string& fields, const std::string& body,
                           const std::string& forwarded_for = "127.0.0.1") {
  return "POST " + target + " HTTP/1.1\r\n" + fields + "X-Forwarded-Proto: http\r\nX-Forwarded-For: " + forwarded_for +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The same for a chunked body: streamed on, chunked (one chunk: the bytes arrived in one read),
// without the client's chunk extensions and trailers.
std::string forwarded_chunked_post(const std::string& target, const std::string& fields, const std::string& body) {
  std::ostringstream size;
  size << std::hex << body.size();
  return "POST " + target + " HTTP/1.1\r\n" + fields +
         "X-Forwarded-Proto: http\r\nX-Forwarded-For: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" + size.str() +
         "\r\n" + body + "\r\n0\r\n\r\n";
}

TEST_F(RequestFraming, AcceptedHeadsReachTheUpstreamAsExactlyTheseBytes) {
  const std::string close = "Connection: close\r\n";
  const std::vector<ForwardedCase> cases = {
      {"Content-Length body",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n" + close + "\r\nhello",
       forwarded_post("/plain/x", "Host: svc\r\nContent-Type: text/plain\r\n", "hello")},
      {"chunked body, streamed on chunked",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n" + close + "\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
       forwarded_chunked_post("/plain/x", "Host: svc\r\n", "hello world")},
      {"chunk extensions dropped",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n" + close + "\r\n5;name=value\r\nhello\r\n0;last\r\n\r\n",
       forwarded_chunked_post("/plain/x", "Host: svc\r\n", "hello")},
      {"request trailers dropped",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n" + close +
           "\r\n5\r\nhello\r\n0\r\nAuthorization: Bearer smuggled\r\n\r\n",
       forwarded_chunked_post("/plain/x", "Host: svc\r\n", "hello")},
      {"Content-Length with a leading zero",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nContent-Length: 005\r\n" + close + "\r\nhello",
       forwarded_post("/plain/x", "Host: svc\r\n", "hello")},
      {"mixed-case chunked with OWS",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding:  cHuNkEd \t\r\n" + close + "\r\n2\r\nhi\r\n0\r\n\r\n",
       forwarded_chunked_post("/plain/x", "Host: svc\r\n", "hi")},
      {"fields a Connection line names are hop-by-hop",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nX-Secret: a\r\nX-Kept: b\r\nConnection: close, X-Secret\r\nContent-Length: 0\r\n\r\n",
       forwarded_post("/plain/x", "Host: svc\r\nX-Kept: b\r\n", "")},
      {"every Connection line counts",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nX-One: 1\r\nX-Two: 2\r\nConnection: X-One\r\nConnection: close, X-Two\r\nContent-Length: 0\r\n\r\n",
       forwarded_post("/plain/x", "Host: svc\r\n", "")},
      {"the standard hop-by-hop fields",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n"
       "Upgrade: websocket\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x", "Host: svc\r\n", "")},
      {"X-Forwarded-For lines joined, this hop appended",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 10.0.0.2\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x", "Host: svc\r\n", "", "203.0.113.7, 10.0.0.2, 127.0.0.1")},
      {"a client's X-Forwarded-Proto is replaced",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nX-Forwarded-Proto: https\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x", "Host: svc\r\n", "")},
      {"absolute form becomes origin form, its authority the Host",
       "POST http://Other.Example:8080/plain/x?q=1 HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x?q=1", "Host: Other.Example:8080\r\n", "")},
      {"the path normalized, the query as sent",
       "POST /a/./b/../../%70lain//x?path=%2F..%2F&%41 HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x?path=%2F..%2F&%41", "Host: svc\r\n", "")},
      {"percent-encodings other than unreserved upper-cased",
       "POST /plain/x%3a%c3%a9 HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x%3A%C3%A9", "Host: svc\r\n", "")},
      {"Expect: 100-continue is answered here, not forwarded",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nExpect: 100-continue\r\nContent-Length: 2\r\n" + close + "\r\nhi",
       forwarded_post("/plain/x", "Host: svc\r\n", "hi"), "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 "},
      {"HTTP/1.0 is forwarded as HTTP/1.0, kept alive to the upstream",
       "POST /plain/x HTTP/1.0\r\nHost: svc\r\nContent-Length: 2\r\n\r\nhi",
       "POST /plain/x HTTP/1.0\r\nHost: svc\r\nX-Forwarded-Proto: http\r\nX-Forwarded-For: 127.0.0.1\r\n"
       "Connection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
       "HTTP/1.0 200 "},
      // RFC 9112 §5.2 lets a server replace obs-fold with SP before interpreting the value.
      {"obs-fold becomes one space",
       "POST /plain/x HTTP/1.1\r\nHost: svc\r\nX-Folded: a\r\n b\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x", "Host: svc\r\nX-Folded: a b\r\n", "")},
      {"Host with a port, kept as sent",
       "POST /plain/x HTTP/1.1\r\nHost: svc:8080\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x", "Host: svc:8080\r\n", "")},
      {"Host an IPv6 literal",
       "POST /plain/x HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Length: 0\r\n" + close + "\r\n",
       forwarded_post("/plain/x", "Host: [::1]:8080\r\n", "")},
  };
  for (const ForwardedCase& forwarded : cases) expect_forwarded(forwarded);
}

// Two requests in one write: both reach the upstream, in order, each exactly once, and the client
// gets two responses in order.
TEST_F(RequestFraming, PipelinedRequestsAreForwardedInOrderEachOnce) {
  take_captured();
  const std::string first = "POST /plain/one HTTP/1.1\r\nHost: svc\r\nContent-Length: 1\r\n\r\n1";
  const std::string second = "POST /plain/two HTTP/1.1\r\nHost: svc\r\nContent-Length: 1\r\nConnection: close\r\n\r\n2";
  const RawExchange exchange = raw_exchange(proxy().proxy_port(), first + second, std::chrono::seconds(5));
  ASSERT_TRUE(exchange.error.empty()) << exchange.error;
  const std::size_t first_response = exchange.received.find("HTTP/1.1 200 ");
  const std::size_t second_response = exchange.received.find("HTTP/1.1 200 ", first_response + 1);
  EXPECT_EQ(first_response, 0u) << exchange.received;
  EXPECT_NE(second_response, std::string::npos) << exchange.received;
  EXPECT_EQ(take_captured(), forwarded_post("/plain/one", "Host: svc\r\n", "1") + forwarded_post("/plain/two", "Host: svc\r\n", "2"));
}

TEST_F(RequestFraming, MalformedFieldSyntaxIsRefused) {
  run({
      {"bare LF line ending", "POST /plain/x HTTP/1.1\nHost: svc\nContent-Length: 0\n\n", 400},
      {"NUL in a value", post_plain(std::string("X-Note: a\0b\r\nContent-Length: 0\r\n", 30), ""), 400},
      {"space before the colon", post_plain("Content-Length : 0\r\n", ""), 400},
      {"a field name with a space", post_plain("X Note: a\r\nContent-Length: 0\r\n", ""), 400},
      {"a field line without a colon", post_plain("X-Note\r\nContent-Length: 0\r\n", ""), 400},
      {"Content-Length beyond 64 bits", post_plain("Content-Length: 99999999999999999999999\r\n", ""), 400},
  });
}

// A route for an upstream that routes case-insensitively and ignores a trailing slash: those
// spellings reach its handler, so they are guarded too, and forwarded as sent.
TEST_F(RequestFraming, LooseRoutesGuardTheSpellingsTheirUpstreamAccepts) {
  for (const std::string target : {"/loose", "/LOOSE", "/Loose/", "/%4Coose/"}) {
    SCOPED_TRACE(target);
    const RawExchange unkeyed = raw_exchange(
        proxy().proxy_port(), "POST " + target + " HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        std::chrono::seconds(5));
    EXPECT_NE(unkeyed.received.find("urn:idemproxy:problem:key-missing"), std::string::npos) << unkeyed.received.substr(0, 400);
  }
  EXPECT_EQ(upstream_total(), 0u);
  const std::string key = unique_key("loose");
  expect_forwarded({"a keyed spelling is forwarded as sent",
                   "POST /LOOSE/ HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: " + key + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    forwarded_post("/LOOSE/", "Host: svc\r\nIdempotency-Key: " + key + "\r\n", "")});
}

// Route bypass: spellings a common upstream router reads as /orders are matched (and forwarded)
// as /orders, so the key: required route still guards them; what cannot be normalized safely is
// refused.
TEST_F(RequestFraming, SpellingsOfAGuardedPathCannotSkipItsRoute) {
  for (const std::string target : {"http://svc/orders", "/%6Frders", "/x/../orders", "//orders", "/./orders"}) {
    SCOPED_TRACE(target);
    const std::string bytes = "POST " + target + " HTTP/1.1\r\nHost: svc\r\nX-Tenant-Id: t1\r\nContent-Length: 2\r\n"
                              "Connection: close\r\n\r\n{}";
    const RawExchange unkeyed = raw_exchange(proxy().proxy_port(), bytes, std::chrono::seconds(5));
    EXPECT_TRUE(unkeyed.received.starts_with("HTTP/1.1 400 ")) << unkeyed.received.substr(0, 300);
    EXPECT_NE(unkeyed.received.find("urn:idemproxy:problem:key-missing"), std::string::npos) << unkeyed.received.substr(0, 400);
  }
  EXPECT_EQ(upstream_total(), 0u) << "an unkeyed request reached the upstream past the key: required route";

  // With a key: executed once, the upstream sees the normalized target, and the other spelling
  // of the same request replays it.
  const std::string key = unique_key("normalized");
  const auto keyed = [&](const std::string& target) {
    return "POST " + target + " HTTP/1.1\r\nHost: svc\r\nX-Tenant-Id: t1\r\nIdempotency-Key: " + key +
           "\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
  };
  const RawExchange first = raw_exchange(proxy().proxy_port(), keyed("/%6Frders"), std::chrono::seconds(5));
  EXPECT_TRUE(first.received.starts_with("HTTP/1.1 200 ")) << first.received.substr(0, 300);
  EXPECT_NE(first.received.find("\"target\":\"/orders\""), std::string::npos) << first.received;
  const RawExchange second = raw_exchange(proxy().proxy_port(), keyed("http://svc//orders"), std::chrono::seconds(5));
  EXPECT_NE(second.received.find("Idempotent-Replay: true"), std::string::npos) << second.received.substr(0, 400);
  EXPECT_EQ(upstream_count(key), 1u);
}

// `;` path parameters: Tomcat, Jetty and Spring serve `POST /orders;x` as `/orders`, so the
// key: required route of /orders guards it (before, it matched no route and was forwarded plain).
// It is forwarded as sent (an upstream may read its parameters), and executes once. A dot or inner
// empty segment with parameters, which those servers and the others read as two different paths,
// is refused.
TEST_F(RequestFraming, PathParametersCannotSkipTheRouteOfTheirPath) {
  for (const std::string target : {"/orders;x", "/orders;jsessionid=AB12", "/orders;x?q=1", "/orders/7;v=1/refunds"}) {
    SCOPED_TRACE(target);
    const std::string bytes = "POST " + target +
                              " HTTP/1.1\r\nHost: svc\r\nX-Tenant-Id: t1\r\nContent-Length: 2\r\n"
                              "Connection: close\r\n\r\n{}";
    const RawExchange unkeyed = raw_exchange(proxy().proxy_port(), bytes, std::chrono::seconds(5));
    EXPECT_TRUE(unkeyed.received.starts_with("HTTP/1.1 400 ")) << unkeyed.received.substr(0, 300);
    EXPECT_NE(unkeyed.received.find("urn:idemproxy:problem:key-missing"), std::string::npos)
        << unkeyed.received.substr(0, 400);
  }
  EXPECT_EQ(upstream_total(), 0u) << "an unkeyed request with path parameters reached the upstream past its route";

  const std::string key = unique_key("path-parameters");
  const std::string keyed = "POST /orders;x HTTP/1.1\r\nHost: svc\r\nX-Tenant-Id: t1\r\nIdempotency-Key: " + key +
                            "\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
  const RawExchange first = raw_exchange(proxy().proxy_port(), keyed, std::chrono::seconds(5));
  EXPECT_TRUE(first.received.starts_with("HTTP/1.1 200 ")) << first.received.substr(0, 300);
  EXPECT_EQ(first.received.find("Idempotent-Replay"), std::string::npos) << first.received.substr(0, 400);
  EXPECT_NE(first.received.find("\"target\":\"/orders;x\""), std::string::npos) << first.received;
  const RawExchange retry = raw_exchange(proxy().proxy_port(), keyed, std::chrono::seconds(5));
  EXPECT_TRUE(retry.received.starts_with("HTTP/1.1 200 ")) << retry.received.substr(0, 300);
  EXPECT_NE(retry.received.find("Idempotent-Replay: true"), std::string::npos) << retry.received.substr(0, 400);
  EXPECT_EQ(upstream_count(key), 1u);

  run({
      {"dot-dot segment with parameters", "POST /x/..;y/orders HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n",
       400},
      {"dot segment with parameters", "POST /.;y/orders HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
      {"empty segment with parameters", "POST /;y/orders HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
  });
}

TEST_F(RequestFraming, TargetsThatCannotBeNormalizedSafelyAreRefused) {
  run({
      {"encoded slash", "POST /orders%2Fx HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
      {"encoded backslash", "POST /orders%5cx HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
      {"encoded NUL", "POST /orders%00 HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
      {"backslash", "POST /orders\\x HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
      {"bad percent-encoding", "POST /orders%zz HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
      {"not http", "POST ftp://svc/orders HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
      {"authority with user info", "POST http://u@svc/orders HTTP/1.1\r\nHost: svc\r\nContent-Length: 0\r\n\r\n", 400},
  });
}

}  // namespace
}  // namespace idem::test::e2e
