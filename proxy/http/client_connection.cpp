#include "http/client_connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <string>

#include "core/problem.hpp"
#include "http/client_session.hpp"
#include "http/proxy_metrics.hpp"
#include "tls/tls_context.hpp"
#include "tls/tls_session.hpp"
#include "log/log.hpp"

namespace idem::http {
namespace asio = boost::asio;

void ClientConnection::close() {
  boost::system::error_code ignored;
  socket.shutdown(asio::socket_base::shutdown_both, ignored);
  socket.close(ignored);
}

void ClientConnection::reset() {
  boost::system::error_code ignored;
  socket.set_option(asio::socket_base::linger(true, 0), ignored);  // close() then sends RST, not FIN
  socket.close(ignored);
}

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
// Time for the close_notify exchange when the proxy ends a TLS connection.
constexpr std::chrono::seconds kTlsShutdownTime{2};

// Ends a TLS connection the proxy is done with: close_notify sent, the client's awaited for a
// bounded time. Skipped when the socket is already gone (timeout, reset, drain).
asio::awaitable<void> end_tls(TlsStream& stream, ClientConnection& connection) {
  if (!connection.socket.is_open()) co_return;
  connection.deadline.expire_after(kTlsShutdownTime);
  // The outcome changes nothing: the connection is closed either way.
  co_await stream.async_shutdown(use_tuple);
}

// Runs `serve(stream)` over the connection's transport: the TCP stream as it is or, when the
// configuration snapshot has a listener TLS context, TLS after a handshake bounded by
// limits.header_timeout. The connection keeps that context for its whole life (a reload gives
// only later connections the new one).
template <class Serve>
asio::awaitable<void> over_client_transport(ClientConnection& connection, WorkerServices& services,
                                            const std::string& address, Serve serve) {
  const std::shared_ptr<tls::ListenerTls> listener_tls = services.config->listener_tls;
  if (!listener_tls) {
    co_await serve(connection.socket);
    co_return;
  }
  TlsStream stream(connection.socket, listener_tls->context);
  connection.deadline.expire_after(services.config->options.limits.header_timeout);
  auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
  if (ec) {
    // Plain HTTP sent to the TLS port, a protocol version below the minimum, a scanner: there is
    // no way to answer any of them in HTTP. A client gone before saying anything (a TCP health
    // probe) is not worth an info line per probe.
    const bool went_away =
        ec == asio::error::eof || ec == asio::ssl::error::stream_truncated || ec == asio::error::connection_reset;
    log::write(went_away ? log::Level::debug : log::Level::info, "tls_handshake_failed",
               {{"client", address}, {"reason", tls::tls_error_text(ec)}});
    co_return;
  }
  co_await serve(stream);
  co_await end_tls(stream, connection);
}

std::string client_address(ClientConnection& connection) { return wire::peer_address(connection.socket); }

}  // namespace

asio::awaitable<void> serve_client(ClientConnection& connection, WorkerServices& services, const bool& draining) {
  const std::string address = client_address(connection);
  co_await over_client_transport(connection, services, address, [&](auto& stream) {
    return serve_http_over(stream, connection, services, draining, address);
  });
}

asio::awaitable<void> refuse_connection(ClientConnection& connection, WorkerServices& services) {
  const std::string address = client_address(connection);
  co_await over_client_transport(connection, services, address, [&](auto& stream) {
    return refuse_over(stream, connection, core::too_many_connections_problem(), 11,
                       services.config->problem_docs_url(), services.config->options.limits.write_timeout,
                       services.metrics);
  });
}

}  // namespace idem::http
