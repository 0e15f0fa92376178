// The client session over the plain TCP stream: client_session_loop.hpp instantiated for it.
#include "http/client_session_loop.hpp"

namespace idem::http {

boost::asio::awaitable<void> serve_http_over(wire::Socket& stream, ClientConnection& connection,
                                             WorkerServices& services, const bool& draining,
                                             const std::string& address) {
  return session_loop::serve_http(stream, connection, services, draining, address);
}

boost::asio::awaitable<void> refuse_over(wire::Socket& stream, ClientConnection& connection, core::Problem problem,
                                         unsigned version, std::string docs_url,
                                         std::chrono::milliseconds write_timeout, ProxyMetrics& metrics) {
  return session_loop::refuse(stream, connection, std::move(problem), version, std::move(docs_url), write_timeout,
                              metrics);
}

}  // namespace idem::http
