// wire/http_head.hpp: the head it writes, followed by the body, is byte for byte what Beast's
// serializer writes for the same message (the proxy used Beast's serializer before, and every
// peer has seen its bytes).
#include <gtest/gtest.h>

#include <boost/beast/http/write.hpp>
#include <sstream>
#include <string>

#include "wire/http_head.hpp"

namespace idem::wire {
namespace {
namespace beast_http = boost::beast::http;

template <class Message>
std::string beast_bytes(const Message& message) {
  std::ostringstream out;
  out << message;
  return out.str();
}

template <class Message>
std::string head_and_body(const Message& message) {
  std::string bytes = "stale bytes the head replaces";
  write_head(message, bytes);
  return bytes + message.body();
}

TEST(HttpHead, RequestIsWhatBeastWrites) {
  HeadRequest request{beast_http::verb::post, "/orders?dry_run=1", 11};
  request.set(beast_http::field::host, "api.example.com");
  request.insert("X-Forwarded-For", "10.0.0.1");
  request.insert("X-Forwarded-For", "10.0.0.2");
  request.insert("X-Empty", "");
  request.body() = R"({"amount":100})";
  request.prepare_payload();
  EXPECT_EQ(head_and_body(request), beast_bytes(request));
  EXPECT_TRUE(body_sent_as_is(request));
}

TEST(HttpHead, UnknownMethodAndHttp10) {
  HeadRequest request;
  request.method_string("PURGE");
  request.target("/cache/item");
  request.version(10);
  EXPECT_EQ(head_and_body(request), beast_bytes(request));
}

TEST(HttpHead, ResponseWithTheUpstreamsReason) {
  HeadResponse response{beast_http::status::created, 11};
  response.reason("Made It");
  response.set(beast_http::field::content_type, "application/json");
  response.body() = R"({"id":1})";
  response.prepare_payload();
  EXPECT_EQ(head_and_body(response), beast_bytes(response));
}

TEST(HttpHead, ResponseWithoutReasonGetsTheStandardOne) {
  for (const unsigned status : {200U, 204U, 304U, 409U, 422U, 503U, 299U, 599U}) {
    HeadResponse response{static_cast<beast_http::status>(status), 11};
    response.set("Idempotent-Replay", "true");
    response.prepare_payload();
    EXPECT_EQ(head_and_body(response), beast_bytes(response)) << status;
  }
}

TEST(HttpHead, AResponseWithATransferCodingIsLeftToBeast) {
  HeadResponse response{beast_http::status::ok, 11};
  response.set(beast_http::field::transfer_encoding, "chunked");
  EXPECT_FALSE(body_sent_as_is(response));
  HeadRequest request{beast_http::verb::post, "/", 11};
  request.set(beast_http::field::transfer_encoding, "gzip, chunked");
  EXPECT_FALSE(body_sent_as_is(request));
  // Named by a string in any case, as a parser stores what it read.
  HeadResponse parsed{beast_http::status::ok, 11};
  parsed.insert("x-a", "1");
  parsed.insert("TRANSFER-encoding", "chunked");
  EXPECT_FALSE(body_sent_as_is(parsed));
  parsed.erase("Transfer-Encoding");
  EXPECT_TRUE(body_sent_as_is(parsed));
}

}  // namespace
}  // namespace idem::wire
