#pragma once
// Keep-alive connection pool to the one upstream, owned by one worker (one io_context, one
// thread: no locking). Each exchange writes a request and reads the whole response under the
// upstream timeout. An https:// upstream gets TLS on every pooled connection (see
// tls::UpstreamTlsOptions): verified, named by SNI, kept alive like plain ones.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/message.hpp"
#include "http/proxy_options.hpp"
#include "http/upstream.hpp"
#include "wire/socket.hpp"

namespace boost::asio::ssl {
class context;
}

namespace idem::http {

class UpstreamPool final : public Upstream {
 public:
  // `max_connections`: open connections this pool may hold (busy + idle). Start-up only: resolves
  // the upstream's host name once and loads the TLS files of an https upstream; throws
  // std::runtime_error saying what failed.
  UpstreamPool(boost::asio::io_context& io, const UpstreamOptions& upstream, std::size_t max_connections);
  ~UpstreamPool() override;
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Runs on the pool's io_context. A stale pooled connection found closed when written to is
  // replaced once.
  boost::asio::awaitable<UpstreamResult> exchange(const UpstreamRequest& request, std::size_t keep_up_to,
                                                  std::chrono::milliseconds timeout) override;
  boost::asio::awaitable<core::UpstreamFailure> acquire(UpstreamLease& lease) override;
  void close_idle() override;
  std::size_t open_connections() const { return open_; }

 private:
  using Transport = UpstreamTransport;
  using Connection = UpstreamConnection;
  using Ticket = ConnectionTicket;

  std::optional<Connection> take_idle(std::chrono::steady_clock::time_point now);
  void put_idle(Connection&& connection, std::chrono::steady_clock::time_point now);
  void take_back(Connection&& connection) override {
    put_idle(std::move(connection), std::chrono::steady_clock::now());
  }
  // A new connection, TLS handshake included; a failure says what went wrong.
  boost::asio::awaitable<core::UpstreamFailure> open_connection(Connection& connection);

  boost::asio::io_context& io_;
  std::string name_;                                // in its log lines
  std::vector<wire::Endpoint> endpoints_;           // the host's addresses, tried in order; or its unix socket
  std::string unix_socket_;                         // set: the upstream listens there
  std::shared_ptr<boost::asio::ssl::context> tls_;  // null: plain HTTP
  std::string tls_name_;                            // SNI and the name verified
  bool tls_verify_ = true;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds idle_timeout_;
  std::size_t max_connections_;
  std::size_t open_ = 0;
  std::vector<Connection> idle_;  // most recently used last
};

}  // namespace idem::http
