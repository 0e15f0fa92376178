#pragma once
// Moves one HTTP/1 message body from where it is parsed to where it goes, through a fixed window:
// Beast's relay pattern (a parser filling a caller's buffer, error::need_buffer when it is full),
// with Beast's chunk framing (make_chunk, make_chunk_last) on the way out. Nothing more is read
// from the source than the sink has taken: a window is written out before the next read, so a
// slow sink holds the source back through TCP and memory does not grow with the body. Whatever a
// read brings is written out at once (an event the source flushed reaches the sink without
// waiting for the window to fill).
//
// A Source offers `awaitable<IoResult> read_some(asio::mutable_buffer)` and a Sink `awaitable<IoResult>
// write(ConstBufferSequence)` (every byte, or an error and how many went); each keeps its own
// deadlines and reports a passed one as beast::error::timeout. A Parser is Beast's
// parser<isRequest, buffer_body> or anything with the same put/put_eof/is_done and the two
// window functions below (found by argument-dependent lookup).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

namespace idem::wire {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace beast_http = boost::beast::http;

using IoResult = std::tuple<boost::system::error_code, std::size_t>;

// At most this much is asked of one read: what one window holds.
inline constexpr std::size_t kBodyWindow = 32 * 1024;
// The longest chunk size line (extensions included) or trailer section taken, as nginx bounds
// what it buffers of a request by its header buffers.
inline constexpr std::size_t kMaxChunkFraming = 64 * 1024;

enum class OutFraming {
  raw,      // the bytes as they are (a length, or until the close)
  chunked,  // each window one chunk, then the last chunk (trailers are not passed on)
};

enum class PumpEnd {
  complete,       // the whole body went out (chunked: with its last chunk)
  source_failed,  // the source closed or failed before the body's end (`ec`: why)
  malformed,      // the parser refused what the source sent (`ec`: its error; body_limit among them)
  sink_failed,    // the sink failed (`ec`), or its deadline passed (timeout)
};

struct PumpResult {
  PumpEnd end = PumpEnd::complete;
  boost::system::error_code ec;
  std::uint64_t body_bytes = 0;     // body bytes the sink took
  std::uint64_t bytes_written = 0;  // bytes the sink took, prefix and framing included
  std::size_t unsent = 0;           // sink_failed: body bytes of the failed write, still in the window
};

// The window of Beast's parser<isRequest, buffer_body>.
template <bool isRequest>
void body_window(beast_http::parser<isRequest, beast_http::buffer_body>& parser, char* data, std::size_t size) {
  auto& body = parser.get().body();
  body.data = data;
  body.size = size;
  body.more = true;
}
template <bool isRequest>
std::size_t body_window_left(const beast_http::parser<isRequest, beast_http::buffer_body>& parser) {
  return parser.get().body().size;
}

// One step of filling a window from what is buffered.
enum class BodyStep {
  done,       // the body is complete
  full,       // the window is full
  read,       // more bytes must be read first
  malformed,  // the parser refused the bytes (`ec`: its error; body_limit among them)
};

// Feeds `in` to `parser` (eager: as much as the window takes), consuming what it parsed.
template <class Parser>
BodyStep parse_buffered_body(Parser& parser, beast::flat_buffer& in, boost::system::error_code& ec) {
  for (;;) {
    if (parser.is_done()) return BodyStep::done;
    if (in.size() == 0) return BodyStep::read;
    const std::size_t used = parser.put(in.data(), ec);
    in.consume(used);
    if (ec == beast_http::error::need_buffer) {
      ec = {};
      return BodyStep::full;
    }
    if (ec == beast_http::error::need_more || (!ec && used == 0 && !parser.is_done())) {
      // What is left unparsed is a chunk's size line or the trailers, which Beast takes whole
      // and does not bound: past kMaxChunkFraming they are refused, or a peer could grow them
      // without end.
      ec = in.size() >= kMaxChunkFraming ? beast_http::error::bad_chunk : boost::system::error_code();
      return ec ? BodyStep::malformed : BodyStep::read;
    }
    if (ec) return BodyStep::malformed;
    if (used == 0) return BodyStep::done;
  }
}

// Reads what the source has next into `in` (a window's worth at most: Beast's read_size would ask
// for what the buffer's capacity happens to hold, 512 bytes at first). The close ends a body that
// has no length (done); anywhere else it cuts the body short (`ec` partial_message). Returns
// false with `ec` set when the body cannot go on.
template <class Parser, class Source>
asio::awaitable<bool> read_body_bytes(Parser& parser, beast::flat_buffer& in, Source& source,
                                      boost::system::error_code& ec) {
  const std::size_t space = std::min(kBodyWindow, in.max_size() - in.size());
  if (space == 0) {
    ec = beast_http::error::buffer_overflow;
    co_return false;
  }
  auto [read_ec, got] = co_await source.read_some(in.prepare(space));
  in.commit(got);
  if (read_ec == asio::error::eof) {
    boost::system::error_code eof_ec;
    parser.put_eof(eof_ec);
    if (!eof_ec && parser.is_done()) co_return true;
    ec = eof_ec ? eof_ec : beast_http::error::partial_message;
    co_return false;
  }
  ec = read_ec;
  co_return !read_ec;
}

// Moves the body `parser` reads from `in` (bytes already buffered first) and `source` to `sink`,
// through `window`. `prefix` (a head) goes out with the first write (alone when nothing of the
// body is buffered and the source must be waited for), and `prefilled` bytes already in the
// window (a write that failed, made again on another connection) before anything new.
// The parser must have read its head; it is set eager here.
template <class Parser, class Source, class Sink>
asio::awaitable<PumpResult> pump_body(Parser& parser, beast::flat_buffer& in, Source& source, Sink& sink,
                                      OutFraming framing, std::span<char> window, std::string_view prefix,
                                      std::size_t prefilled = 0) {
  PumpResult result;
  parser.eager(true);
  std::size_t held = prefilled;
  for (;;) {
    body_window(parser, window.data() + held, window.size() - held);
    // Fill the window from what is buffered; read only when nothing parseable is left and the
    // window is still empty (what it holds goes out first).
    for (;;) {
      const BodyStep step = parse_buffered_body(parser, in, result.ec);
      if (step == BodyStep::malformed) {
        result.end = PumpEnd::malformed;
        co_return result;
      }
      if (step != BodyStep::read || window.size() - body_window_left(parser) > 0) break;
      if (!prefix.empty()) {
        // No body byte is here yet: the head goes now, on its own (a feed's client sees its
        // answer begin at once; an upstream sees the request's head before the body comes).
        const asio::const_buffer head(prefix.data(), prefix.size());
        auto [head_ec, head_written] = co_await sink.write(head);
        result.bytes_written += head_written;
        if (head_ec) {
          result.end = PumpEnd::sink_failed;
          result.ec = head_ec;
          co_return result;
        }
        prefix = {};
      }
      if (!co_await read_body_bytes(parser, in, source, result.ec)) {
        result.end = PumpEnd::source_failed;
        co_return result;
      }
    }
    held = window.size() - body_window_left(parser);
    const bool done = parser.is_done();
    const asio::const_buffer head(prefix.data(), prefix.size());
    const asio::const_buffer data(window.data(), held);
    boost::system::error_code write_ec;
    std::size_t written = 0;
    // (Named buffer sequences, not temporaries, in co_await expressions: GCC 12 mishandles them.)
    if (framing == OutFraming::raw) {
      if (head.size() + data.size() > 0) {
        const std::array<asio::const_buffer, 2> out{head, data};
        auto [ec, n] = co_await sink.write(out);
        write_ec = ec;
        written = n;
      }
    } else if (held > 0 && done) {
      const auto out = beast::buffers_cat(head, beast_http::make_chunk(data), beast_http::make_chunk_last());
      auto [ec, n] = co_await sink.write(out);
      write_ec = ec;
      written = n;
    } else if (held > 0) {
      const auto out = beast::buffers_cat(head, beast_http::make_chunk(data));
      auto [ec, n] = co_await sink.write(out);
      write_ec = ec;
      written = n;
    } else if (done) {
      const auto out = beast::buffers_cat(head, beast_http::make_chunk_last());
      auto [ec, n] = co_await sink.write(out);
      write_ec = ec;
      written = n;
    }
    result.bytes_written += written;
    if (write_ec) {
      result.end = PumpEnd::sink_failed;
      result.ec = write_ec;
      result.unsent = held;
      co_return result;
    }
    result.body_bytes += held;
    held = 0;
    prefix = {};
    if (done) co_return result;
  }
}

enum class BodyKept {
  whole,       // the body is complete, all of it in `body`
  past_limit,  // the body goes on past `limit` (its first bytes in `body`, perhaps none): stream the rest
  failed,      // the source failed or closed early, or sent what the parser refuses (`ec`)
};

// Reads the body `parser` reads from `in` and `source` into `body` while it fits `limit`: an answer
// to store must be whole, and one past the limit is known as soon as possible (a Content-Length
// above it before a byte of the body is read) and not read further here.
template <class Parser, class Source>
asio::awaitable<BodyKept> read_body_up_to(Parser& parser, beast::flat_buffer& in, Source& source, std::string& body,
                                          std::size_t limit, boost::system::error_code& ec) {
  parser.eager(true);
  // The string grows ahead of the parser (zero-filled): to the length when one is known, else by
  // as much again as it holds (4 KiB at first); never past limit + 1 bytes.
  const auto length = parser.content_length();
  if (length && *length > limit && !parser.is_done()) co_return BodyKept::past_limit;
  for (;;) {
    if (parser.is_done()) co_return BodyKept::whole;
    if (body.size() > limit) co_return BodyKept::past_limit;
    const std::size_t kept = body.size();
    const std::size_t wanted =
        length && *length > kept ? static_cast<std::size_t>(*length) - kept : std::max<std::size_t>(4096, kept);
    const std::size_t room = std::min(wanted, limit + 1 - kept);
    body.resize(kept + room);
    body_window(parser, body.data() + kept, room);
    const BodyStep step = parse_buffered_body(parser, in, ec);
    body.resize(kept + room - body_window_left(parser));
    if (step == BodyStep::malformed) co_return BodyKept::failed;
    if (step == BodyStep::read && !co_await read_body_bytes(parser, in, source, ec)) co_return BodyKept::failed;
  }
}

}  // namespace idem::wire
