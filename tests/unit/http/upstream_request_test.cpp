// http/upstream_request.hpp: the head the upstream is sent for a client's request, field by field.
#include <gtest/gtest.h>

#include <string>

#include "http/upstream_request.hpp"

namespace idem::http {
namespace {

RequestParts request(beast_http::verb method, std::vector<FieldView> fields, std::string_view body = "",
                     unsigned version = 11) {
  return RequestParts{.method = method,
                      .method_string = beast_http::to_string(method),
                      .target = "/orders?x=1",
                      .version = version,
                      .fields = std::move(fields),
                      .body = body};
}

FieldView field(std::string_view name, std::string_view value) {
  return {beast_http::string_to_field(name), name, value};
}

std::string head(const RequestParts& parts, std::string_view client = "192.0.2.7") {
  const UpstreamRequest upstream(parts, client);
  std::string out = "stale";
  upstream.write_head(out);
  return out;
}

TEST(UpstreamRequest, HopByHopFieldsAndExpectGoAndTheForwardedForChainGrows) {
  const RequestParts parts =
      request(beast_http::verb::post,
              {field("Host", "shop.example"), field("Connection", "keep-alive, X-Secret"), field("X-Secret", "s"),
               field("Keep-Alive", "timeout=5"), field("TE", "trailers"), field("Upgrade", "h2c"),
               field("Expect", "100-continue"), field("X-Forwarded-For", "10.0.0.1"), field("Idempotency-Key", "k-1"),
               field("x-forwarded-for", "10.0.0.2, 10.0.0.3"), field("X-Forwarded-For", ""),
               field("X-Forwarded-Proto", "https"), field("Content-Length", "2")},
              "{}");
  EXPECT_EQ(head(parts),
            "POST /orders?x=1 HTTP/1.1\r\nHost: shop.example\r\nIdempotency-Key: k-1\r\nX-Forwarded-Proto: https\r\n"
            "X-Forwarded-For: 10.0.0.1, 10.0.0.2, 10.0.0.3, 192.0.2.7\r\nContent-Length: 2\r\n\r\n");
}

TEST(UpstreamRequest, TheProxysForwardedProtoSurvivesAConnectionHeaderNamingIt) {
  const RequestParts parts =
      request(beast_http::verb::get, {field("Host", "a"), field("Connection", "X-Forwarded-Proto, X-Forwarded-For"),
                                      field("X-Forwarded-For", "10.9.9.9"), field("X-Forwarded-Proto", "http")});
  EXPECT_EQ(head(parts),
            "GET /orders?x=1 HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: http\r\n"
            "X-Forwarded-For: 192.0.2.7\r\n\r\n")
      << "a Connection header naming X-Forwarded-For drops the client's lines from the chain";
}

TEST(UpstreamRequest, ABodysLengthReplacesTheClientsFramingOnlyWhereTheMethodStatesOne) {
  // A decoded chunked body goes on with its length; every Content-Length line becomes one, last.
  EXPECT_EQ(head(request(beast_http::verb::put, {field("Transfer-Encoding", "chunked"), field("Host", "a")}, "abcde")),
            "PUT /orders?x=1 HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 192.0.2.7\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(head(request(beast_http::verb::post, {field("Content-Length", "0"), field("Host", "a")})),
            "POST /orders?x=1 HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 192.0.2.7\r\nContent-Length: 0\r\n\r\n");
  // An empty GET keeps what it said (here a zero length), a chunked one goes without framing.
  EXPECT_EQ(head(request(beast_http::verb::get, {field("Host", "a"), field("Content-Length", "0")})),
            "GET /orders?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nX-Forwarded-For: 192.0.2.7\r\n\r\n");
  EXPECT_EQ(head(request(beast_http::verb::get, {field("Host", "a"), field("Transfer-Encoding", "chunked")})),
            "GET /orders?x=1 HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 192.0.2.7\r\n\r\n");
}

TEST(UpstreamRequest, AnHttp10RequestAsksTheUpstreamToKeepTheConnection) {
  EXPECT_EQ(head(request(beast_http::verb::get, {field("Host", "a"), field("Connection", "close")}, "", 10)),
            "GET /orders?x=1 HTTP/1.0\r\nHost: a\r\nX-Forwarded-For: 192.0.2.7\r\nConnection: keep-alive\r\n\r\n");
}

// A streamed body (http/streamed_forwarding.hpp): its length goes on as the parser read it (the
// digits normalized, the field last), a chunked one goes on chunked.
TEST(UpstreamRequest, AStreamedBodyKeepsItsLengthOrGoesOnChunked) {
  const auto streamed = [](const RequestParts& parts, RequestBodyFraming framing, std::uint64_t length) {
    const UpstreamRequest upstream(parts, "192.0.2.7", framing, length);
    std::string out;
    upstream.write_head(out);
    return out;
  };
  EXPECT_EQ(streamed(request(beast_http::verb::put, {field("Content-Length", "005"), field("Host", "a")}),
                     RequestBodyFraming::streamed_length, 5),
            "PUT /orders?x=1 HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 192.0.2.7\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(streamed(request(beast_http::verb::post, {field("Transfer-Encoding", "chunked"), field("Host", "a")}),
                     RequestBodyFraming::streamed_chunked, 0),
            "POST /orders?x=1 HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 192.0.2.7\r\nTransfer-Encoding: chunked\r\n\r\n");
}

}  // namespace
}  // namespace idem::http
