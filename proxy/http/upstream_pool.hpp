#pragma once
// Keep-alive connection pool to the one upstream, owned by one worker (one io_context, one
// thread: no locking). Each exchange writes a request and reads the whole response under the
// upstream timeout.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "http/message.hpp"

namespace idem::http {

enum class UpstreamFailure {
  none,
  // Nothing reached the upstream: safe to release the key and let the client retry.
  connect_failed,
  pool_exhausted,
  // The request was (at least partly) written: the upstream may have executed it.
  timeout,
  connection_lost,
  bad_response,
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
  // `max_connections`: open connections this pool may hold (busy + idle).
  UpstreamPool(boost::asio::io_context& io, const config::UpstreamConfig& upstream, std::size_t max_connections,
               std::size_t max_response_body);
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
  struct Connection {
    boost::beast::tcp_stream stream;
    Ticket ticket;
    std::chrono::steady_clock::time_point idle_since{};
  };

  std::optional<Connection> take_idle();
  void put_idle(Connection&& connection);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::endpoint endpoint_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds idle_timeout_;
  std::size_t max_connections_;
  std::size_t max_response_body_;
  std::size_t open_ = 0;
  std::vector<Connection> idle_;  // most recently used last
};

}  // namespace idem::http
