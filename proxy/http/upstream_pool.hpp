#pragma once
// Keep-alive connection pool to the one upstream, owned by one worker (one io_context, one
// thread: no locking). Each exchange writes a request and reads the whole response under the
// upstream timeout. An https:// upstream gets TLS on every pooled connection (see
// config::UpstreamTlsConfig): verified, named by SNI, kept alive like plain ones.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "http/message.hpp"

namespace boost::asio::ssl { class context; }

namespace idem::http {

enum class UpstreamFailure {
  none,
  // Nothing reached the upstream: safe to release the key and let the client retry.
  connect_failed,
  pool_exhausted,
  // The TLS handshake failed (certificate not verified, name mismatch, our client certificate
  // refused, no common version): nothing reached the upstream's application.
  tls_failed,
  // The request was (at least partly) written: the upstream may have executed it.
  timeout,
  connection_lost,
  bad_response,
  switched_protocols,  // 101, which no request of ours asks for: the connection is not HTTP any more
  response_too_large,  // the status line and headers arrived; the body exceeded max_response_body
};
std::string_view upstream_failure_name(UpstreamFailure failure);
// True when the upstream cannot have executed the request.
bool nothing_sent(UpstreamFailure failure);

struct UpstreamResult {
  UpstreamFailure failure = UpstreamFailure::none;
  Response response;  // complete when failure == none; header only for response_too_large
  std::chrono::microseconds elapsed{0};
};

class UpstreamPool {
 public:
  // `max_connections`: open connections this pool may hold (busy + idle). Start-up only: resolves
  // the upstream's host name once and loads the TLS files of an https upstream; throws
  // std::runtime_error saying what failed.
  UpstreamPool(boost::asio::io_context& io, const config::UpstreamConfig& upstream, std::size_t max_connections,
               std::size_t max_response_body);
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // `request` must already be prepared for the upstream (see forwarding.hpp). Runs on the pool's
  // io_context. A stale pooled connection found closed when written to is replaced once.
  boost::asio::awaitable<UpstreamResult> exchange(const Request& request);

  void close_idle();  // drop every idle connection (shutdown)
  std::size_t open_connections() const { return open_; }

 private:
  // Counts an open connection for as long as it lives, so every exit path gives its slot back.
  class Ticket {
   public:
    explicit Ticket(std::size_t* open) : open_(open) { ++*open_; }
    Ticket(Ticket&& other) noexcept : open_(std::exchange(other.open_, nullptr)) {}
    Ticket& operator=(Ticket&& other) noexcept {
      if (this != &other) { release(); open_ = std::exchange(other.open_, nullptr); }
      return *this;
    }
    ~Ticket() { release(); }
   private:
    void release() { if (open_) --*open_; open_ = nullptr; }
    std::size_t* open_;
  };
  struct Transport;  // TCP, and TLS over it for an https upstream (upstream_pool.cpp)
  struct Connection {
    std::unique_ptr<Transport> transport;  // on the heap: the TLS layer refers to the TCP stream
    Ticket ticket;
    std::chrono::steady_clock::time_point idle_since{};
  };

  std::optional<Connection> take_idle();
  void put_idle(Connection&& connection);
  // A new connection, TLS handshake included; a failure says what went wrong.
  boost::asio::awaitable<UpstreamFailure> open_connection(Connection& connection);

  boost::asio::io_context& io_;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;  // the host's addresses, tried in order
  std::shared_ptr<boost::asio::ssl::context> tls_;         // null: plain HTTP
  std::string tls_name_;                                   // SNI and the name verified
  bool tls_verify_ = true;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds idle_timeout_;
  std::size_t max_connections_;
  std::size_t max_response_body_;
  std::size_t open_ = 0;
  std::vector<Connection> idle_;  // most recently used last
};

}  // namespace idem::http
