// What the client receives of an upstream response, beyond status and body: framing fields as
// RFC 9110 §8.6 allows them, no trailer taken for a header field, no replay marker the upstream
// made up; and what the upstream receives of a client's list fields sent on several lines.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "e2e/e2e_support.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

using ResponseFraming = ProxyTest;

// The head of a raw response, up to the blank line.
std::string head_of(const std::string& raw) { return raw.substr(0, raw.find("\r\n\r\n") + 2); }

// POST /orders with a key, as raw bytes, the extra fields given; Connection: close.
std::string raw_order(const std::string& key, const std::string& fields) {
  const std::string body(kOrderBody);
  return "POST /orders HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: " + key +
         "\r\nX-Tenant-Id: t1\r\nContent-Type: application/json\r\nConnection: close\r\n" + fields +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_F(ResponseFraming, NoContentCarriesNoContentLengthFirstOrReplayed) {
  const std::string key = unique_key("no-content");
  const std::string request = raw_order(key, std::string(upstream::kStatusHeader) + ": 204\r\n");
  for (const char* pass : {"first", "replay"}) {
    const RawExchange exchange = raw_exchange(proxy().proxy_port(), request, std::chrono::seconds(5));
    ASSERT_TRUE(exchange.error.empty()) << exchange.error;
    const std::string head = head_of(exchange.received);
    EXPECT_TRUE(head.starts_with("HTTP/1.1 204 ")) << pass << "\n" << head;
    EXPECT_EQ(head.find("Content-Length"), std::string::npos) << pass << "\n" << head;
  }
  EXPECT_EQ(upstream_count(key), 1u);
}

TEST_F(ResponseFraming, NotModifiedKeepsTheUpstreamsContentLength) {
  const std::string key = unique_key("not-modified");
  const std::string request = raw_order(key, std::string(upstream::kStatusHeader) + ": 304\r\n" +
                                                 std::string(upstream::kAddHeaderHeader) + ": Content-Length: 42\r\n");
  const RawExchange exchange = raw_exchange(proxy().proxy_port(), request, std::chrono::seconds(5));
  ASSERT_TRUE(exchange.error.empty()) << exchange.error;
  const std::string head = head_of(exchange.received);
  EXPECT_TRUE(head.starts_with("HTTP/1.1 304 ")) << head;
  EXPECT_NE(head.find("Content-Length: 42\r\n"), std::string::npos) << head;
  EXPECT_EQ(exchange.received.size(), head.size() + 2) << "a 304 has no body";
}

TEST_F(ResponseFraming, TrailersAreNeitherHeaderFieldsNorStored) {
  const std::string key = unique_key("trailer");
  const auto request = order(key).with(std::string(upstream::kChunkedHeader), "1")
                           .with(std::string(upstream::kTrailerHeader), "X-Checksum: abc");
  const HttpResponse first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 200) << describe(first);
  EXPECT_FALSE(first.header("X-Checksum")) << describe(first);
  const HttpResponse replay = send(request);
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_FALSE(replay.header("X-Checksum")) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
}

TEST_F(ResponseFraming, AnUpstreamsOwnReplayHeaderNeverReachesTheClient) {
  const std::string key = unique_key("fake-replay");
  const auto request = order(key).with(std::string(upstream::kAddHeaderHeader), "Idempotent-Replay: true");
  const HttpResponse first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_FALSE(first.header("Idempotent-Replay")) << "a first execution presented as a replay:\n" << describe(first);
  const HttpResponse replay = send(request);
  EXPECT_EQ(replay.header("Idempotent-Replay"), std::optional<std::string>("true")) << describe(replay);
}

TEST_F(ResponseFraming, ListFieldsOnSeveralLinesAreReadWhole) {
  // Two X-Forwarded-For lines (HAProxy appends one) and a Connection list split over two lines.
  const std::string fields = "X-Forwarded-For: 203.0.113.1\r\nX-Forwarded-For: 198.51.100.2\r\n"
                             "Connection: keep-alive\r\nConnection: X-Hop-Secret\r\nX-Hop-Secret: 1\r\n";
  const std::string bytes = "POST /plain/x HTTP/1.1\r\nHost: svc\r\n" + fields +
                            std::string(upstream::kEchoHeadersHeader) + ": 1\r\nContent-Length: 0\r\n\r\n";
  const RawExchange exchange = raw_exchange(proxy().proxy_port(), bytes + "GET /plain/y HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n",
                                            std::chrono::seconds(5));
  ASSERT_TRUE(exchange.error.empty()) << exchange.error;
  EXPECT_NE(exchange.received.find("\"x_forwarded_for\":\"203.0.113.1, 198.51.100.2, 127.0.0.1\""), std::string::npos)
      << exchange.received;
  EXPECT_EQ(exchange.received.find("X-Hop-Secret"), std::string::npos) << "a field named by the second Connection line was forwarded";
}

}  // namespace
}  // namespace idem::test::e2e
