// Reverse-proxy duties around the idempotency machinery: body limits, byte-exact bodies, chunked
// upstream responses, unreachable and slow upstreams, forwarding headers, keep-alive.
#include <openssl/evp.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "support/ports.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

using Proxying = ProxyTest;

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EXPECT_EQ(EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr), 1);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0x0f]);
  }
  return hex;
}

HttpRequest binary_order(std::string_view key, std::string body) {
  return HttpRequest::post("/orders", std::move(body), "application/octet-stream")
      .with("Idempotency-Key", std::string(key))
      .with("X-Tenant-Id", "t1");
}

// "a 5 MB request body": forwarded intact (the upstream hashes what it got), executed once, and the
// retry (fingerprinted over the same 5 MB) replays.
TEST_F(Proxying, FiveMegabyteRequestBodyExecutesOnceAndReplays) {
  const std::string key = unique_key("5mb");
  std::string body = upstream::pattern_body(5 * 1000 * 1000);
  const auto first = send(binary_order(key, body));
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(string_member(upstream_json(first), "body_sha256"), sha256_hex(body));
  const auto replay = send(binary_order(key, body));
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);

  body.back() = static_cast<char>(body.back() ^ 1);  // one bit in the last byte
  expect_problem(send(binary_order(key, body)), 422, "fingerprint-mismatch");
  EXPECT_EQ(upstream_count(key), 1u);
}

// Body limits: past limits.max_request_body (8 MiB here) -> 413 problem+json, upstream untouched.
TEST_F(Proxying, RequestBodyOverTheLimitIs413) {
  const std::string key = unique_key("9mb");
  const auto response = send(binary_order(key, upstream::pattern_body(9 * 1000 * 1000)));
  expect_problem(response, 413, "request-too-large");
  EXPECT_EQ(upstream_total(), 0u);
}

// "a binary body replayed byte-exact": all 256 byte values through the echo upstream and back.
TEST_F(Proxying, BinaryBodyIsReplayedByteExact) {
  const std::string key = unique_key("binary");
  std::string body;
  for (int round = 0; round < 4; ++round)
    for (int byte = 0; byte < 256; ++byte) body.push_back(static_cast<char>(byte));
  const auto request = binary_order(key, body).with(std::string(upstream::kEchoHeader), "1");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(first.body, body);
  EXPECT_EQ(first.header("Content-Type"), "application/octet-stream");
  const auto replay = send(request);
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, body);
  EXPECT_EQ(replay.header("Content-Type"), "application/octet-stream");
  EXPECT_EQ(upstream_count(key), 1u);
}

// Chunked upstream responses are read whole, stored and replayed whole.
TEST_F(Proxying, ChunkedUpstreamResponseIsStoredAndReplayedWhole) {
  const std::string key = unique_key("chunked");
  const auto request = order(key)
                           .with(std::string(upstream::kChunkedHeader), "1")
                           .with(std::string(upstream::kBodySizeHeader), "100000");
  const auto first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(first.body, upstream::pattern_body(100000));
  const auto replay = send(request);
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, upstream::pattern_body(100000));
  EXPECT_EQ(upstream_count(key), 1u);
}

// X-Forwarded-For / X-Forwarded-Proto are added for the upstream.
TEST_F(Proxying, ForwardingHeadersReachTheUpstream) {
  const auto guarded = send(order(unique_key("fwd")));
  const auto plain = send(HttpRequest::get("/plain/forwarded"));
  for (const auto* response : {&guarded, &plain}) {
    ASSERT_TRUE(response->ok()) << response->error;
    ASSERT_EQ(response->status, 200) << describe(*response);
    const auto body = upstream_json(*response);
    EXPECT_EQ(string_member(body, "x_forwarded_for"), "127.0.0.1") << response->body;
    EXPECT_EQ(string_member(body, "x_forwarded_proto"), "http") << response->body;
  }
}

// A client naming the proxy's own fields in Connection cannot strip them: hop-by-hop fields go
// before the proxy adds X-Forwarded-Proto and X-Forwarded-For, on both kinds of route.
TEST_F(Proxying, ConnectionNamingTheForwardingHeadersDoesNotStripThem) {
  const auto guarded =
      send(order(unique_key("fwd-conn")).with("Connection", "keep-alive, X-Forwarded-Proto, X-Forwarded-For"));
  const auto plain =
      send(HttpRequest::get("/plain/forwarded").with("Connection", "keep-alive, X-Forwarded-Proto, X-Forwarded-For"));
  for (const auto* response : {&guarded, &plain}) {
    ASSERT_TRUE(response->ok()) << response->error;
    ASSERT_EQ(response->status, 200) << describe(*response);
    const auto body = upstream_json(*response);
    EXPECT_EQ(string_member(body, "x_forwarded_proto"), "http") << response->body;
    EXPECT_EQ(string_member(body, "x_forwarded_for"), "127.0.0.1") << response->body;
  }
}

// Hop-by-hop request headers (RFC 9110 §7.6.1), including those named by Connection, are not
// forwarded; end-to-end headers are.
TEST_F(Proxying, HopByHopRequestHeadersAreNotForwarded) {
  const auto response = send(HttpRequest::get("/plain/hops")
                                 .with("Connection", "keep-alive, X-Hop-Secret")
                                 .with("X-Hop-Secret", "do-not-forward")
                                 .with("Keep-Alive", "timeout=5")
                                 .with("X-End-To-End", "forward-me")
                                 .with(std::string(upstream::kEchoHeadersHeader), "1"));
  ASSERT_TRUE(response.ok()) << response.error;
  ASSERT_EQ(response.status, 200) << describe(response);
  const auto body = upstream_json(response);
  const auto* headers = body.if_contains("headers");
  ASSERT_TRUE(headers != nullptr && headers->is_array()) << response.body;
  bool end_to_end_seen = false;
  for (const auto& header : headers->as_array()) {
    const std::string name(header.as_array().at(0).as_string());
    EXPECT_FALSE(iequals(name, "X-Hop-Secret")) << "forwarded a header listed in Connection";
    EXPECT_FALSE(iequals(name, "Keep-Alive")) << "forwarded Keep-Alive";
    end_to_end_seen = end_to_end_seen || iequals(name, "X-End-To-End");
  }
  EXPECT_TRUE(end_to_end_seen) << response.body;
}

// Keep-alive on the client side: several requests, guarded and plain, over one connection.
TEST_F(Proxying, ClientConnectionIsKeptAlive) {
  HttpConnection connection(proxy().proxy_port());
  const std::string key = unique_key("keepalive");
  const auto first = connection.send(order(key));
  const auto replay = connection.send(order(key));
  const auto plain = connection.send(HttpRequest::get("/plain/keepalive"));
  const auto rejected = connection.send(HttpRequest::post("/orders", std::string(kOrderBody)));  // no key
  const auto after_problem = connection.send(order(unique_key("keepalive2")));
  for (const auto* response : {&first, &replay, &plain, &rejected, &after_problem})
    ASSERT_TRUE(response->ok()) << response->error;
  EXPECT_EQ(first.status, 200);
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(plain.status, 200);
  expect_problem(rejected, 400, "key-missing");
  EXPECT_EQ(after_problem.status, 200);
  EXPECT_TRUE(connection.is_open());
  EXPECT_EQ(upstream_total(), 3u);
}

// Garbage on one connection is answered 400 problem+json and closed, and does not disturb the
// next client.
TEST_F(Proxying, MalformedRequestDoesNotDisturbLaterRequests) {
  const auto exchange = raw_exchange(proxy().proxy_port(), "THIS IS NOT HTTP\r\n\r\n", std::chrono::seconds(3));
  ASSERT_TRUE(exchange.error.empty()) << exchange.error;
  EXPECT_TRUE(exchange.received.starts_with("HTTP/1.1 400 ")) << exchange.received.substr(0, 200);
  EXPECT_NE(exchange.received.find("application/problem+json"), std::string::npos) << exchange.received.substr(0, 300);
  EXPECT_TRUE(exchange.peer_closed);
  const auto response = send(order(unique_key("after-garbage")));
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, 200) << describe(response);
  EXPECT_EQ(upstream_total(), 1u);
}

// Upstream timeout: a hanging upstream gets 504 problem+json after upstream.timeout (1 s here).
class SlowUpstream : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.variables["UPSTREAM_TIMEOUT"] = "1s";
    return options;
  }
};

TEST_F(SlowUpstream, HangingUpstreamIs504AfterTheTimeout) {
  const std::string key = unique_key("hang");
  const auto started = std::chrono::steady_clock::now();
  const auto response = send(order(key).with(std::string(upstream::kHangHeader), "1"));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  expect_problem(response, 504, "upstream-timeout");
  EXPECT_GE(elapsed, std::chrono::milliseconds(900));
  EXPECT_LT(elapsed, std::chrono::seconds(4));
  EXPECT_EQ(upstream_count(key), 1u);
}

// A pooled upstream connection carries each exchange's own deadline: a hang on a connection that
// just served a quick request is cut one timeout after the hanging request started, not after
// the earlier one (wire/socket_deadline.hpp moves the deadline without re-arming its timer).
TEST_F(SlowUpstream, AHangOnAReusedConnectionIs504OneTimeoutAfterItStarted) {
  HttpConnection connection(proxy().proxy_port(), std::chrono::seconds(10));  // one worker, one pool
  const auto quick = connection.send(order(unique_key("quick")));
  ASSERT_TRUE(quick.ok()) << quick.error;
  ASSERT_EQ(quick.status, 200) << describe(quick);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // half the earlier deadline gone
  const std::string key = unique_key("hang-reused");
  const auto started = std::chrono::steady_clock::now();
  const auto response = connection.send(order(key).with(std::string(upstream::kHangHeader), "1"));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  expect_problem(response, 504, "upstream-timeout");
  EXPECT_GE(elapsed, std::chrono::milliseconds(900));
  EXPECT_LT(elapsed, std::chrono::seconds(4));
  EXPECT_EQ(upstream_count(key), 1u);
}

// Upstream unreachable: nothing was sent, so the proxy answers 502 and releases the record; once an
// upstream listens, the retry executes (the first attempt never counted).
class UnreachableUpstream : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.start_upstream = false;  // the config points at a free port nothing listens on
    return options;
  }
};

TEST_F(UnreachableUpstream, Is502AndTheRetryExecutesOnceTheUpstreamIsUp) {
  const std::string key = unique_key("down");
  const auto down = send(order(key));
  expect_problem(down, 502, "upstream-unreachable");

  proxy().start_upstream_now();
  const auto retry = send(order(key));
  ASSERT_TRUE(retry.ok()) << retry.error;
  EXPECT_EQ(retry.status, 200) << describe(retry);
  EXPECT_FALSE(retry.has_header("Idempotent-Replay"));
  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_TRUE(is_replay(send(order(key))));
}

// Upstream resets the connection after reading the request: the outcome is unknown, so the client
// gets a 5xx problem (never a fake success), the POST is not resent behind the client's back, and
// the proxy keeps serving.
TEST_F(Proxying, UpstreamResetIsA5xxProblem) {
  const std::string key = unique_key("reset");
  const auto response = send(order(key).with(std::string(upstream::kResetHeader), "1"));
  ASSERT_TRUE(response.ok()) << response.error;
  EXPECT_GE(response.status, 500) << describe(response);
  EXPECT_LE(response.status, 504) << describe(response);
  EXPECT_EQ(response.header("Content-Type").value_or("").substr(0, kProblemContentType.size()), kProblemContentType);
  EXPECT_EQ(upstream_count(key), 1u);
  const auto next = send(order(unique_key("after-reset")));
  EXPECT_EQ(next.status, 200) << describe(next);
}

}  // namespace
}  // namespace idem::test::e2e
