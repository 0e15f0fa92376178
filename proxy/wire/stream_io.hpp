#pragma once
// Reads and writes for a streamed body, each under a deadline that bounds the silence of one
// operation rather than the whole body (nginx's proxy_read_timeout, send_timeout): a read waits
// at most `timeout` for its first byte; a write fails only when it makes no progress for `timeout`
// (the deadline moves on with every partial write). The deadline is lifted once the operation
// completes, so the time spent on the other side of the pump is never charged to this one.
// `Deadline` is anything with expire_after(duration) and expire_never() that closes the socket when
// it passes (wire::SocketDeadline, wire::ClientStream), and tells that it did (expired() or
// timed_out()): a failure then is reported as beast::error::timeout.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <cstddef>
#include <type_traits>

#include "wire/body_pump.hpp"
#include "wire/socket.hpp"

namespace idem::wire {

inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// asio's transfer_all per operation, with the deadline moved on before each.
template <class Deadline>
struct MoveDeadlineOnProgress {
  Deadline* deadline;
  std::chrono::milliseconds timeout;
  std::size_t operator()(const boost::system::error_code& ec, std::size_t) const {
    if (ec) return 0;
    deadline->expire_after(timeout);
    return 64 * 1024;  // asio's default_max_transfer_size
  }
};

template <class Deadline>
boost::system::error_code timed_out_or(const Deadline& deadline, const boost::system::error_code& ec) {
  bool passed = false;
  if constexpr (requires { deadline.expired(); }) {
    passed = deadline.expired();
  } else {
    passed = deadline.timed_out();
  }
  return ec && passed ? boost::system::error_code(beast::error::timeout) : ec;
}

template <class AsyncReadStream, class Deadline>
asio::awaitable<IoResult> read_some_within(AsyncReadStream& stream, asio::mutable_buffer buffer, Deadline& deadline,
                                           std::chrono::milliseconds timeout) {
  deadline.expire_after(timeout);
  auto [ec, n] = co_await stream.async_read_some(buffer, use_tuple);
  deadline.expire_never();
  co_return IoResult{timed_out_or(deadline, ec), n};
}

// Every byte of `buffers`. A non-blocking TCP socket is written at once first: a window usually
// fits its send buffer, and then no reactor operation, completion and resumption are spent.
template <class AsyncWriteStream, class Buffers, class Deadline>
asio::awaitable<IoResult> write_within(AsyncWriteStream& stream, const Buffers& buffers, Deadline& deadline,
                                       std::chrono::milliseconds timeout) {
  std::size_t written = 0;
  beast::buffers_suffix<Buffers> rest(buffers);
  if constexpr (std::is_same_v<AsyncWriteStream, Socket>) {
    if (stream.non_blocking()) {
      boost::system::error_code ec;
      written = stream.write_some(rest, ec);
      if (ec && ec != asio::error::would_block) co_return IoResult{timed_out_or(deadline, ec), written};
      rest.consume(written);
      if (beast::buffer_bytes(rest) == 0) co_return IoResult{boost::system::error_code{}, written};
    }
  }
  const MoveDeadlineOnProgress<Deadline> condition{&deadline, timeout};
  auto [ec, n] = co_await asio::async_write(stream, rest, condition, use_tuple);
  deadline.expire_never();
  co_return IoResult{timed_out_or(deadline, ec), written + n};
}

}  // namespace idem::wire
