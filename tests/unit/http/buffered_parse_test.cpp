// wire/buffered_parse.hpp: the body of a message whose head was read, parsed from the bytes
// already buffered, or a clear "read more"; never more than the message (a pipelined next
// request stays buffered), and the parser's own errors as async_read would report them.
#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>
#include <string_view>

#include "wire/buffered_parse.hpp"

namespace idem::wire {
namespace {
namespace beast = boost::beast;
namespace beast_http = boost::beast::http;

struct HeadRead {
  beast_http::request_parser<beast_http::string_body> parser;
  beast::flat_buffer buffer;
};

// The parser after its head was parsed from `bytes` (as async_read_header leaves it), the rest
// of `bytes` buffered.
void read_head(HeadRead& read, std::string_view bytes, std::uint64_t body_limit = 1024) {
  read.parser.body_limit(body_limit);
  const auto size = boost::asio::buffer_copy(read.buffer.prepare(bytes.size()), boost::asio::buffer(bytes));
  read.buffer.commit(size);
  read.parser.eager(false);
  beast::error_code ec;
  const std::size_t used = read.parser.put(read.buffer.data(), ec);
  read.buffer.consume(used);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(read.parser.is_header_done());
}

TEST(BufferedParse, AWholeBodyInTheBufferCompletesTheMessage) {
  HeadRead read;
  read_head(read, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
  beast::error_code ec;
  std::size_t parsed = 0;
  EXPECT_TRUE(parse_buffered(read.parser, read.buffer, ec, parsed));
  EXPECT_FALSE(ec);
  EXPECT_EQ(parsed, 5u);
  EXPECT_EQ(read.parser.get().body(), "hello");
  EXPECT_EQ(read.buffer.size(), 0u);
}

TEST(BufferedParse, APartialBodyAsksForARead) {
  HeadRead read;
  read_head(read, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhel");
  beast::error_code ec;
  std::size_t parsed = 0;
  EXPECT_FALSE(parse_buffered(read.parser, read.buffer, ec, parsed));
  EXPECT_FALSE(ec);
  EXPECT_FALSE(read.parser.is_done());
}

TEST(BufferedParse, ANextPipelinedRequestStaysBuffered) {
  HeadRead read;
  const std::string next = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
  read_head(read, "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n" + next);
  beast::error_code ec;
  std::size_t parsed = 0;
  EXPECT_TRUE(parse_buffered(read.parser, read.buffer, ec, parsed));
  EXPECT_FALSE(ec);
  EXPECT_EQ(read.parser.get().body(), "hi");
  EXPECT_EQ(std::string(static_cast<const char*>(read.buffer.data().data()), read.buffer.size()), next);
}

TEST(BufferedParse, ABodyOverTheLimitIsTheParsersError) {
  HeadRead read;
  read_head(read, "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n0\r\n\r\n", 4);
  beast::error_code ec;
  std::size_t parsed = 0;
  EXPECT_TRUE(parse_buffered(read.parser, read.buffer, ec, parsed));
  EXPECT_EQ(ec, beast_http::error::body_limit);
}

TEST(BufferedParse, NothingBufferedAsksForARead) {
  HeadRead read;
  read_head(read, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n");
  beast::error_code ec;
  std::size_t parsed = 0;
  EXPECT_FALSE(parse_buffered(read.parser, read.buffer, ec, parsed));
  EXPECT_FALSE(ec);
  EXPECT_EQ(parsed, 0u);
}

void buffer_bytes(beast::flat_buffer& buffer, std::string_view bytes) {
  buffer.commit(boost::asio::buffer_copy(buffer.prepare(bytes.size()), boost::asio::buffer(bytes)));
}

TEST(BufferedParseHeader, AWholeHeadIsParsedAndTheBodyLeftBuffered) {
  beast_http::request_parser<beast_http::string_body> parser;
  beast::flat_buffer buffer;
  buffer_bytes(buffer, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
  beast::error_code ec;
  EXPECT_TRUE(parse_buffered_header(parser, buffer, ec));
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_header_done());
  EXPECT_EQ(parser.get().target(), "/a");
  EXPECT_EQ(parser.get()[beast_http::field::host], "h");
  EXPECT_EQ(beast::buffers_to_string(buffer.data()), "hello");  // the body is the body parse's
}

// Beast takes the complete lines of a partial head (and keeps them): what it took is consumed, so
// the read that follows continues from there, as async_read_header's own reads would.
TEST(BufferedParseHeader, APartialHeadAsksForAReadAndTheReadContinuesIt) {
  beast_http::request_parser<beast_http::string_body> parser;
  beast::flat_buffer buffer;
  const std::string partial = "GET /a HTTP/1.1\r\nHost: h\r\nX-Long: abc";
  buffer_bytes(buffer, partial);
  beast::error_code ec;
  EXPECT_FALSE(parse_buffered_header(parser, buffer, ec));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(beast::buffers_to_string(buffer.data()), "X-Long: abc");
  buffer_bytes(buffer, "def\r\n\r\n");
  EXPECT_TRUE(parse_buffered_header(parser, buffer, ec));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.get()["X-Long"], "abcdef");
  EXPECT_EQ(buffer.size(), 0u);
}

TEST(BufferedParseHeader, AnEmptyBufferAsksForARead) {
  beast_http::request_parser<beast_http::string_body> parser;
  beast::flat_buffer buffer;
  beast::error_code ec;
  EXPECT_FALSE(parse_buffered_header(parser, buffer, ec));
  EXPECT_FALSE(ec);
}

TEST(BufferedParseHeader, TheParsersErrorsAreReportedAsTheReadWouldReportThem) {
  beast_http::request_parser<beast_http::string_body> bad_line;
  beast::flat_buffer buffer;
  buffer_bytes(buffer, "GET /a HTTP/9.9\r\nHost: h\r\n\r\n");
  beast::error_code ec;
  EXPECT_TRUE(parse_buffered_header(bad_line, buffer, ec));
  EXPECT_EQ(ec, beast_http::error::bad_version);

  beast_http::request_parser<beast_http::string_body> too_long;
  too_long.header_limit(32);
  beast::flat_buffer long_head;
  buffer_bytes(long_head, "GET /a HTTP/1.1\r\nHost: h\r\nX-Pad: " + std::string(64, 'p'));
  EXPECT_TRUE(parse_buffered_header(too_long, long_head, ec));
  EXPECT_EQ(ec, beast_http::error::header_limit);
}

}  // namespace
}  // namespace idem::wire
