#pragma once
// The byte stream of a connection this process opens as an HTTP client (the upstream pool's, and
// idemrelay's HTTP sink's): TCP, or TLS over it for an https:// peer. One deadline covers both
// layers (a TLS operation is reads and writes on `socket`); an operation it cuts short fails with
// beast::error::timeout. Beast's HTTP read and write are instantiated once, in client_stream.cpp,
// not in every includer (they dominate compile time).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "wire/socket.hpp"
#include "wire/socket_deadline.hpp"

namespace idem::wire {

struct ClientStream {
  using Result = std::tuple<boost::system::error_code, std::size_t>;
  using ResponseParser = boost::beast::http::response_parser<boost::beast::http::string_body>;
  using OutgoingRequest = boost::beast::http::request<boost::beast::http::string_body>;

  struct ResponseLimits {
    std::size_t header_bytes = 64 * 1024;
    std::size_t body_bytes = 1024 * 1024;
    bool head = false;  // the request was HEAD: the response has no body, whatever it says
  };
  // More interim responses than this before the final one is a broken peer (bad_message).
  static constexpr int kMaxInterimResponses = 16;

  // `tls_context` null: plain TCP.
  ClientStream(boost::asio::io_context& io, boost::asio::ssl::context* tls_context);
  ClientStream(const ClientStream&) = delete;  // the TLS layer refers to `socket`
  ClientStream& operator=(const ClientStream&) = delete;

  // The deadline of every operation from now on (SocketDeadline: moving it is cheap).
  void expire_at(std::chrono::steady_clock::time_point when) { deadline_.expire_at(when); }
  void expire_after(std::chrono::steady_clock::duration timeout) { deadline_.expire_after(timeout); }
  void expire_never() { deadline_.expire_never(); }
  // The deadline passed (and closed the socket): a failure since is the deadline's doing.
  bool timed_out() const { return deadline_.expired(); }
  // Closes the socket; pending operations fail.
  void close();

  // Between exchanges, before the connection carries another request: true when the peer has
  // not closed it and not one byte has arrived since the last response, on the socket or inside
  // the TLS layer (a record that came in the same read as the response's last one, decrypted or
  // not, is invisible to the socket). Never blocks; with TLS it may consume such bytes, which
  // only a connection that is not reused had.
  bool ready_for_next_request();

  // Connects to the first of `endpoints` that accepts, in order (TCP addresses, or a unix socket).
  boost::asio::awaitable<boost::system::error_code> connect(const std::vector<Endpoint>& endpoints);

  // After the TCP connect: names the peer (SNI, and the name its certificate must carry when
  // verifying) and runs the client handshake within `timeout`. Nullopt when done, else why not
  // ("certificate verify failed: hostname mismatch", an alert, "timed out"). A no-op without TLS.
  boost::asio::awaitable<std::optional<std::string>> handshake(const std::string& peer_name, bool verify,
                                                               std::chrono::milliseconds timeout);

  // True when a read that got no byte failed because the peer refused the handshake: with TLS 1.3
  // a server checks the client's certificate after the client considers the handshake done, so
  // its refusal arrives in place of the first response, and its application never saw the request.
  bool handshake_refused(const boost::system::error_code& ec, std::size_t bytes_read) const;

  // Writes the whole request (both users send string bodies); bytes written. The request must
  // stay unchanged until the write completes.
  boost::asio::awaitable<Result> write(const OutgoingRequest& request);
  // Writes a request already serialized: its head, then its body, as they are. Both must stay
  // unchanged until the write completes.
  boost::asio::awaitable<Result> write(std::string_view head, std::string_view body);
  // The connection's buffer for a request head (http_head.hpp), its capacity kept across requests.
  std::string& head_buffer() { return head_; }

  // Reads one final response into `parser` (emplaced anew for each message), through `buffer`:
  // bytes read past the response stay in it. Interim responses
  // (100 Continue, 103 Early Hints, any 1xx but 101) are read and dropped, RFC 9110 §15.2: they
  // are never final, so never stored, replayed or taken as a delivery; 103 is not forwarded. 101
  // is final (the caller refuses it: it never asked to switch protocols). Trailer fields after a
  // chunked body are dropped: they are not the response's header fields, so never stored or
  // replayed as such. Bytes: all read.
  boost::asio::awaitable<Result> read_final_response(boost::beast::flat_buffer& buffer,
                                                     std::optional<ResponseParser>& parser,
                                                     const ResponseLimits& limits);

  Socket socket;
  std::optional<boost::asio::ssl::stream<Socket&>> tls;

 private:
  // A failure once the deadline passed is the deadline's doing: the socket was closed under it.
  boost::system::error_code timed_out_or(const boost::system::error_code& ec) const;

  SocketDeadline deadline_;
  std::string head_;  // the request head being written (http_head.hpp), its capacity kept
};

// The peer closed or reset the connection (a TLS peer that closes without close_notify shows as a
// truncated stream): what a keep-alive connection the peer dropped answers a write or a read.
bool is_connection_gone(const boost::system::error_code& ec);

}  // namespace idem::wire
