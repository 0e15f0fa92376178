// http/client_request.hpp: what Beast's parser, driven through ClientRequestParser, leaves in a
// ClientRequest: the fields of the head in arrival order, however the storage grew while they were
// read, a folded value joined, trailers dropped, the body decoded; and the connection's edits.
#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <string>
#include <utility>
#include <vector>

#include "http/client_request.hpp"

namespace idem::http {
namespace {

// Parses `bytes` (one whole request) into `request`; the parser's error, if any.
boost::beast::error_code parse(ClientRequest& request, std::string_view bytes) {
  ClientRequestParser parser(request);
  parser.header_limit(64 * 1024);
  parser.body_limit(1024 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  const std::size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (!ec && (used != bytes.size() || !parser.is_done())) return boost::beast::http::error::partial_message;
  return ec;
}

std::vector<std::pair<std::string, std::string>> fields(const ClientRequest& request) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const FieldView& field : request.parts().fields) out.emplace_back(field.name, field.value);
  return out;
}

TEST(ClientRequest, ManyLargeFieldsKeepTheirOrderAndBytesAsTheStorageGrows) {
  std::string head = "PUT /orders/42?x=1 HTTP/1.1\r\nHost: shop.example\r\n";
  std::vector<std::pair<std::string, std::string>> expected = {{"Host", "shop.example"}};
  for (int i = 0; i < 40; ++i) {
    const std::string name = "X-Field-" + std::to_string(i);
    const std::string value(static_cast<std::size_t>(50 + i * 7), static_cast<char>('a' + i % 26));
    head += name + ": " + value + "\r\n";
    expected.emplace_back(name, value);
  }
  head += "Content-Length: 5\r\n\r\nhello";
  expected.emplace_back("Content-Length", "5");
  ClientRequest request;
  ASSERT_FALSE(parse(request, head));
  EXPECT_EQ(request.parts().method, beast_http::verb::put);
  EXPECT_EQ(request.parts().method_string, "PUT");
  EXPECT_EQ(request.parts().target, "/orders/42?x=1");
  EXPECT_EQ(request.parts().version, 11u);
  EXPECT_EQ(fields(request), expected);
  EXPECT_EQ(request.parts().fields.back().id, beast_http::field::content_length);
  EXPECT_EQ(request.parts().body, "hello");
  EXPECT_EQ(request.request_line_size(), 3u + 14u);
}

TEST(ClientRequest, AFoldedValueIsJoinedAndChunkedTrailersAreDropped) {
  ClientRequest request;
  ASSERT_FALSE(parse(request,
                     "POST /orders HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n  two\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n2\r\nde\r\n0\r\nAuthorization: Bearer smuggled\r\n\r\n"));
  EXPECT_EQ(fields(request), (std::vector<std::pair<std::string, std::string>>{
                                 {"Host", "a"}, {"X-Folded", "one two"}, {"Transfer-Encoding", "chunked"}}));
  EXPECT_EQ(request.parts().body, "abcde");
}

TEST(ClientRequest, ANewRequestStartsEmptyAndTheEditsReplaceEveryLine) {
  ClientRequest request;
  ASSERT_FALSE(parse(request,
                     "POST /a HTTP/1.0\r\nHost: a\r\nX-Forwarded-Proto: spoofed\r\nx-forwarded-proto: b\r\n"
                     "Content-Length: 3\r\n\r\nabc"));
  ASSERT_FALSE(
      parse(request, "GET http://other.example/b/../c HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: spoofed\r\n\r\n"));
  EXPECT_EQ(request.parts().version, 11u);
  EXPECT_EQ(request.parts().body, "");
  request.set_target("/c");
  request.set_host("other.example");
  request.set_field(beast_http::field::unknown, "X-Forwarded-Proto", "https");
  EXPECT_EQ(request.parts().target, "/c");
  EXPECT_EQ(fields(request), (std::vector<std::pair<std::string, std::string>>{{"Host", "other.example"},
                                                                               {"X-Forwarded-Proto", "https"}}));
  EXPECT_EQ(request.parts().fields.front().id, beast_http::field::host);
}

}  // namespace
}  // namespace idem::http
