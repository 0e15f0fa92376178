#pragma once
// The head of an upstream's final response, read through a Source (wire/body_pump.hpp) into a
// parser whose body is then streamed (Beast's parser<false, buffer_body>): interim responses
// (100 Continue, 103 Early Hints, any 1xx but 101) are read and dropped, RFC 9110 §15.2; 101 is
// final, for the caller to refuse or take. A final head with a transfer coding beside a length is
// refused (bad_transfer_encoding). The body is not touched: what arrived with the head
// stays in the buffer for the pump.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "wire/body_pump.hpp"

namespace idem::wire {

using StreamedResponseParser = beast_http::response_parser<beast_http::buffer_body>;

// More interim responses than this before the final one is a broken peer (bad_status).
inline constexpr int kMaxInterimResponses = 16;

// Emplaces `parser` for each message. `head_request`: the response has no body, whatever it
// says. The body has no size limit (a streamed body costs no memory). Bytes: all read (0 with an
// error: the peer closed or failed before its first byte, e.g. a pooled connection it had closed).
// A close before the head is end_of_stream with no byte read, partial_message after some.
template <class Source>
asio::awaitable<IoResult> read_response_head(Source& source, beast::flat_buffer& in,
                                             std::optional<StreamedResponseParser>& parser, std::uint32_t header_limit,
                                             bool head_request) {
  std::size_t total = 0;
  for (int interim = 0;; ++interim) {
    parser.emplace();
    parser->header_limit(header_limit);
    parser->body_limit(boost::none);
    if (head_request) parser->skip(true);
    while (!parser->is_header_done()) {
      if (in.size() > 0) {
        boost::system::error_code ec;
        in.consume(parser->put(in.data(), ec));
        if (ec && ec != beast_http::error::need_more) co_return IoResult{ec, total};
        if (parser->is_header_done()) break;
      }
      const std::size_t space = std::min(kBodyWindow, in.max_size() - in.size());
      if (space == 0) co_return IoResult{beast_http::error::buffer_overflow, total};
      auto [ec, got] = co_await source.read_some(in.prepare(space));
      in.commit(got);
      total += got;
      if (ec == asio::error::eof) {
        co_return IoResult{
            parser->got_some() || in.size() > 0 ? beast_http::error::partial_message : beast_http::error::end_of_stream,
            total};
      }
      if (ec) co_return IoResult{ec, total};
    }
    const unsigned status = parser->get().result_int();
    if (status >= 200 || status == 101) {
      // A coding beside a length (Beast refuses only chunked beside one): RFC 9112 §6.3 has the
      // coding win where Beast takes the length, and calls the message an error; so do we.
      if (parser->content_length() && parser->get().count(beast_http::field::transfer_encoding) > 0) {
        co_return IoResult{beast_http::error::bad_transfer_encoding, total};
      }
      co_return IoResult{boost::system::error_code{}, total};
    }
    if (interim == kMaxInterimResponses) co_return IoResult{beast_http::error::bad_status, total};
  }
}

}  // namespace idem::wire
