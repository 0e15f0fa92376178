#include "wire/client_stream.hpp"

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <algorithm>
#include <array>
#include <iterator>

#include "wire/http_head.hpp"
#include "tls/tls_session.hpp"

namespace idem::wire {
namespace {
constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
constexpr std::size_t kReadSize = 64 * 1024;  // at most this much asked of one read (as Beast's read)
}  // namespace

ClientStream::ClientStream(boost::asio::io_context& io, boost::asio::ssl::context* tls_context)
    : socket(io), deadline_(socket) {
  if (tls_context != nullptr) tls.emplace(socket, *tls_context);
}

void ClientStream::close() {
  boost::system::error_code ignored;
  socket.close(ignored);
}

bool ClientStream::ready_for_next_request() {
  if (!tls) {
    // A peek: EOF, an error or a byte all mean "do not reuse".
    char byte;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  // A read that cannot wait (the socket is non-blocking: connect()): it hands over what the TLS
  // layer holds or the socket brings, decrypting any whole record. Application bytes, a
  // close_notify, EOF or an error: not reusable. A record the peer sends after the response
  // (a TLS 1.3 session ticket) is taken in and is nothing to the application.
  char byte;
  boost::system::error_code ec;
  const std::size_t got = tls->read_some(boost::asio::buffer(&byte, 1), ec);
  if (got > 0 || ec != boost::asio::error::would_block) return false;
  // Nothing whole: still nothing may be buffered, not even part of a record.
  SSL* ssl = tls->native_handle();
  return SSL_has_pending(ssl) == 0 && BIO_ctrl_pending(SSL_get_rbio(ssl)) == 0;
}

bool is_connection_gone(const boost::system::error_code& ec) {
  return ec == boost::beast::http::error::end_of_stream || ec == boost::asio::error::eof ||
         ec == boost::asio::error::connection_reset || ec == boost::asio::error::broken_pipe ||
         ec == boost::asio::error::connection_aborted || ec == boost::asio::ssl::error::stream_truncated;
}

boost::system::error_code ClientStream::timed_out_or(const boost::system::error_code& ec) const {
  if (ec && deadline_.expired()) return boost::beast::error::timeout;
  return ec;
}

boost::asio::awaitable<boost::system::error_code> ClientStream::connect(const std::vector<Endpoint>& endpoints) {
  auto [ec, endpoint] = co_await boost::asio::async_connect(socket, endpoints, use_tuple);
  if (!ec) socket.non_blocking(true, ec);  // write() tries a write at once (see there)
  co_return timed_out_or(ec);
}

boost::asio::awaitable<std::optional<std::string>> ClientStream::handshake(const std::string& peer_name, bool verify,
                                                                           std::chrono::milliseconds timeout) {
  if (!tls) co_return std::nullopt;
  if (!tls::set_upstream_peer_name(tls->native_handle(), peer_name, verify))
    co_return "OpenSSL refused the server name";
  deadline_.expire_after(timeout);
  auto [ec] = co_await tls->async_handshake(boost::asio::ssl::stream_base::client,
                                            boost::asio::as_tuple(boost::asio::use_awaitable));
  if (!ec) co_return std::nullopt;
  co_return tls::upstream_handshake_failure(tls->native_handle(), timed_out_or(ec), verify);
}

boost::asio::awaitable<ClientStream::Result> ClientStream::write(const OutgoingRequest& request) {
  if (!body_sent_as_is(request)) {
    auto [ec, bytes] = tls ? co_await boost::beast::http::async_write(*tls, request, use_tuple)
                           : co_await boost::beast::http::async_write(socket, request, use_tuple);
    co_return Result{timed_out_or(ec), bytes};
  }
  write_head(request, head_);
  co_return co_await write(head_, request.body());
}

boost::asio::awaitable<ClientStream::Result> ClientStream::write(std::string_view head, std::string_view body) {
  std::array<boost::asio::const_buffer, 2> message{boost::asio::buffer(head), boost::asio::buffer(body)};
  std::size_t written = 0;
  if (!tls) {
    // A request usually fits the socket's send buffer: written at once, without a reactor
    // operation, a completion and a resumption. The socket is non-blocking (connect()): a full
    // send buffer answers would_block, and the rest goes asynchronously.
    boost::system::error_code ec;
    written = socket.write_some(message, ec);
    if (ec && ec != boost::asio::error::would_block) co_return Result{timed_out_or(ec), written};
    const std::size_t in_head = std::min(written, message[0].size());
    message[0] += in_head;
    message[1] += written - in_head;
    if (message[0].size() == 0 && message[1].size() == 0) co_return Result{boost::system::error_code{}, written};
  }
  auto [ec, bytes] = tls ? co_await boost::asio::async_write(*tls, message, use_tuple)
                         : co_await boost::asio::async_write(socket, message, use_tuple);
  co_return Result{timed_out_or(ec), written + bytes};
}

boost::asio::awaitable<ClientStream::Result> ClientStream::read_final_response(boost::beast::flat_buffer& buffer,
                                                                               std::optional<ResponseParser>& parser,
                                                                               const ResponseLimits& limits) {
  // Beast's read loop, written out: parse what is buffered, read when the parser needs more. Its
  // composed operations (async_read_header, then async_read for the body) each carry executor
  // work guards and a completion of their own, which cost more than the parsing.
  namespace beast_http = boost::beast::http;
  std::size_t total = 0;  // bytes received
  for (int interim = 0;; ++interim) {
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(limits.header_bytes));
    parser->body_limit(limits.body_bytes);
    if (limits.head) parser->skip(true);
    bool header_done = false;
    std::ptrdiff_t header_fields = -1;  // of a chunked message, counted with the head: later ones are trailers
    for (;;) {
      boost::system::error_code ec;
      bool read_more = buffer.size() == 0;
      if (!read_more) {
        const std::size_t used = parser->put(buffer.data(), ec);
        buffer.consume(used);
        if (ec == beast_http::error::need_more) {
          ec = {};
          read_more = true;
        } else if (ec) {
          co_return Result{ec, total};
        } else if (used == 0) {
          read_more = true;
        }
      }
      if (!header_done && parser->is_header_done()) {
        header_done = true;
        if (parser->chunked()) header_fields = std::distance(parser->get().begin(), parser->get().end());
        parser->eager(true);  // the body: as much as each put can take
      }
      if (parser->is_done()) break;
      if (!read_more) continue;
      const std::size_t space = boost::beast::read_size(buffer, kReadSize);
      if (space == 0) co_return Result{beast_http::error::buffer_overflow, total};
      std::size_t got = 0;
      // (No co_await inside ?: with bindings reassigned here: GCC 12 mishandles it.)
      if (tls) {
        auto [read_ec, read_bytes] = co_await tls->async_read_some(buffer.prepare(space), use_tuple);
        ec = read_ec;
        got = read_bytes;
      } else {
        auto [read_ec, read_bytes] = co_await socket.async_read_some(buffer.prepare(space), use_tuple);
        ec = read_ec;
        got = read_bytes;
      }
      buffer.commit(got);
      total += got;
      if (ec == boost::asio::error::eof) {
        // The close ends a body that has no length; anywhere else it cuts the message short.
        if (!parser->got_some()) co_return Result{beast_http::error::end_of_stream, total};
        ec = {};
        parser->put_eof(ec);
        if (ec) co_return Result{ec, total};
        if (!parser->is_done()) co_return Result{beast_http::error::partial_message, total};
        break;
      }
      if (ec) co_return Result{timed_out_or(ec), total};
    }
    if (header_fields >= 0) {
      auto& message = parser->get();
      auto trailer = std::next(message.begin(), header_fields);
      while (trailer != message.end()) trailer = message.erase(trailer);
    }
    const unsigned status = parser->get().result_int();
    if (status >= 200 || status == 101) co_return Result{boost::system::error_code{}, total};
    if (interim == kMaxInterimResponses) co_return Result{beast_http::error::bad_status, total};
  }
}

bool ClientStream::handshake_refused(const boost::system::error_code& ec, std::size_t bytes_read) const {
  return tls && bytes_read == 0 && tls::is_handshake_rejection(ec);
}

}  // namespace idem::wire
