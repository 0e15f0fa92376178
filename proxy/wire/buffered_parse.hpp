#pragma once
// The rest of a message whose head was just read, parsed from the bytes already buffered: a small
// body usually arrives with its head, and an asynchronous read that finds it buffered still
// completes through the io_context (a composed operation, a post and a resumption: more
// instructions than parsing the body). The caller reads asynchronously only when this says so.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cstddef>

namespace idem::wire {

// Feeds `buffer` to `parser` as http::async_read would (eagerly, consuming what it parsed). True
// when that settled the message: complete, or `ec` set to the error async_read would have
// returned. False when more bytes must be read (then `ec` is clear). `parsed`: bytes consumed.
template <bool isRequest>
bool parse_buffered(boost::beast::http::basic_parser<isRequest>& parser, boost::beast::flat_buffer& buffer,
                    boost::beast::error_code& ec, std::size_t& parsed) {
  parsed = 0;
  if (parser.is_done()) return true;
  if (buffer.size() == 0) return false;
  parser.eager(true);
  parsed = parser.put(buffer.data(), ec);
  buffer.consume(parsed);
  if (ec == boost::beast::http::error::need_more) {
    ec = {};
    return false;
  }
  return ec || parser.is_done();
}

}  // namespace idem::wire

namespace idem::wire {

// The head of a message from the bytes already buffered, as http::async_read_header would parse
// them (a request usually arrives whole with the read that woke the connection). True when that
// settled it: the head is complete, or `ec` holds the error the read would have returned. False
// when more bytes must be read (then `ec` is clear; the complete lines the parser took are consumed,
// and the read continues from them, as async_read_header's own reads do).
template <bool isRequest>
bool parse_buffered_header(boost::beast::http::basic_parser<isRequest>& parser, boost::beast::flat_buffer& buffer,
                           boost::beast::error_code& ec) {
  if (parser.is_header_done()) return true;
  if (buffer.size() == 0) return false;
  buffer.consume(parser.put(buffer.data(), ec));
  if (ec == boost::beast::http::error::need_more) {
    ec = {};
    return false;
  }
  return ec || parser.is_header_done();
}

}  // namespace idem::wire
