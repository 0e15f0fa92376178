#pragma once
// A client connection is served over one of two streams by one loop: the connection's TCP stream
// itself, or TLS over it. Deadlines are always set on the TCP socket, the lowest layer of both: a
// TLS operation is reads and writes on it. One overload per stream, each compiled in its own
// file (client_session_tcp.cpp, client_session_tls.cpp) from client_session_loop.hpp.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <chrono>
#include <string>

#include "core/problem.hpp"
#include "http/client_connection.hpp"

namespace idem::http {

class ProxyMetrics;
using TlsStream = boost::asio::ssl::stream<wire::Socket&>;

// The HTTP/1.1 keep-alive loop until the client closes, a deadline passes or the worker drains.
boost::asio::awaitable<void> serve_http_over(wire::Socket& stream, ClientConnection& connection,
                                             WorkerServices& services, const bool& draining,
                                             const std::string& address);
boost::asio::awaitable<void> serve_http_over(TlsStream& stream, ClientConnection& connection, WorkerServices& services,
                                             const bool& draining, const std::string& address);

// A request the proxy refuses before reading it whole: answered, then the connection is closed
// (the unread rest of the request would otherwise be taken for the next one).
boost::asio::awaitable<void> refuse_over(wire::Socket& stream, ClientConnection& connection, core::Problem problem,
                                         unsigned version, std::string docs_url,
                                         std::chrono::milliseconds write_timeout, ProxyMetrics& metrics);
boost::asio::awaitable<void> refuse_over(TlsStream& stream, ClientConnection& connection, core::Problem problem,
                                         unsigned version, std::string docs_url,
                                         std::chrono::milliseconds write_timeout, ProxyMetrics& metrics);

}  // namespace idem::http
