#include "tls/client_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <array>
#include <iterator>

#include "tls/buffered_parse.hpp"
#include "tls/http_head.hpp"
#include "tls/tls_session.hpp"

namespace idem::tls {
namespace {
constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
}  // namespace

ClientStream::ClientStream(boost::asio::io_context& io, boost::asio::ssl::context* tls_context)
    : tcp(io), deadline_(tcp) {
  if (tls_context != nullptr) tls.emplace(tcp, *tls_context);
}

void ClientStream::close() {
  boost::system::error_code ignored;
  tcp.close(ignored);
}

boost::system::error_code ClientStream::timed_out_or(const boost::system::error_code& ec) const {
  if (ec && deadline_.expired()) return boost::beast::error::timeout;
  return ec;
}

boost::asio::awaitable<boost::system::error_code> ClientStream::connect(
    const std::vector<boost::asio::ip::tcp::endpoint>& endpoints) {
  auto [ec, endpoint] = co_await boost::asio::async_connect(tcp, endpoints, use_tuple);
  co_return timed_out_or(ec);
}

boost::asio::awaitable<std::optional<std::string>> ClientStream::handshake(const std::string& peer_name, bool verify,
                                                                           std::chrono::milliseconds timeout) {
  if (!tls) co_return std::nullopt;
  if (!set_upstream_peer_name(tls->native_handle(), peer_name, verify)) co_return "OpenSSL refused the server name";
  deadline_.expire_after(timeout);
  auto [ec] = co_await tls->async_handshake(boost::asio::ssl::stream_base::client,
                                            boost::asio::as_tuple(boost::asio::use_awaitable));
  if (!ec) co_return std::nullopt;
  co_return upstream_handshake_failure(tls->native_handle(), timed_out_or(ec), verify);
}

boost::asio::awaitable<ClientStream::Result> ClientStream::write(const OutgoingRequest& request) {
  if (!body_sent_as_is(request)) {
    auto [ec, bytes] = tls ? co_await boost::beast::http::async_write(*tls, request, use_tuple)
                           : co_await boost::beast::http::async_write(tcp, request, use_tuple);
    co_return Result{timed_out_or(ec), bytes};
  }
  write_head(request, head_);
  const std::array<boost::asio::const_buffer, 2> message{boost::asio::buffer(head_),
                                                         boost::asio::buffer(request.body())};
  auto [ec, bytes] = tls ? co_await boost::asio::async_write(*tls, message, use_tuple)
                         : co_await boost::asio::async_write(tcp, message, use_tuple);
  co_return Result{timed_out_or(ec), bytes};
}

boost::asio::awaitable<ClientStream::Result> ClientStream::read_final_response(boost::beast::flat_buffer& buffer,
                                                                               std::optional<ResponseParser>& parser,
                                                                               const ResponseLimits& limits) {
  std::size_t total = 0;
  for (int interim = 0;; ++interim) {
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(limits.header_bytes));
    parser->body_limit(limits.body_bytes);
    if (limits.head) parser->skip(true);
    auto [ec, bytes] = tls ? co_await boost::beast::http::async_read_header(*tls, buffer, *parser, use_tuple)
                           : co_await boost::beast::http::async_read_header(tcp, buffer, *parser, use_tuple);
    total += bytes;
    if (ec) co_return Result{timed_out_or(ec), total};
    const auto header_fields = std::distance(parser->get().begin(), parser->get().end());
    if (!parser->is_done()) {
      boost::system::error_code body_ec;
      std::size_t body_bytes = 0;
      if (!parse_buffered(*parser, buffer, body_ec, body_bytes)) {
        total += body_bytes;
        // Bound to names, not assigned through std::tie: GCC 12 mishandles temporaries in co_await.
        auto [read_ec, read_bytes] = tls ? co_await boost::beast::http::async_read(*tls, buffer, *parser, use_tuple)
                                         : co_await boost::beast::http::async_read(tcp, buffer, *parser, use_tuple);
        body_ec = read_ec;
        body_bytes = read_bytes;
      }
      total += body_bytes;
      if (body_ec) co_return Result{timed_out_or(body_ec), total};
      auto& message = parser->get();
      auto trailer = std::next(message.begin(), header_fields);
      while (trailer != message.end()) trailer = message.erase(trailer);
    }
    const unsigned status = parser->get().result_int();
    if (status >= 200 || status == 101) co_return Result{ec, total};
    if (interim == kMaxInterimResponses) co_return Result{boost::beast::http::error::bad_status, total};
  }
}

bool ClientStream::handshake_refused(const boost::system::error_code& ec, std::size_t bytes_read) const {
  return tls && bytes_read == 0 && is_handshake_rejection(ec);
}

}  // namespace idem::tls
