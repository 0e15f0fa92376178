#pragma once
// The one upstream, as the exchange and plain forwarding see it: send a prepared request, get the
// whole response or a named failure; or borrow a connection to stream a request and its response
// through (http/streamed_forwarding.hpp). UpstreamPool is the real one; tests put a fake in its
// place to run the exchange in-process.
#include <boost/asio/awaitable.hpp>
#include <chrono>

#include "core/upstream_failure.hpp"
#include "http/message.hpp"
#include "http/upstream_connection.hpp"
#include "http/upstream_request.hpp"

namespace idem::http {

struct UpstreamResult {
  core::UpstreamFailure failure = core::UpstreamFailure::none;
  Response response;  // complete when failure == none; header only for response_too_large
  std::chrono::microseconds elapsed{0};
};

// Called on the worker's io thread that owns it, one coroutine per request; an implementation
// keeps its own deadlines (an exchange always completes).
class Upstream {
 public:
  virtual ~Upstream() = default;
  virtual boost::asio::awaitable<UpstreamResult> exchange(const UpstreamRequest& request) = 0;
  // A connection for one streamed exchange: a pooled one that looks alive, else a new one
  // (connected, TLS handshake done), within the pool's limit. On failure (nothing sent:
  // connect_failed, tls_failed, pool_exhausted) `lease` holds nothing. The borrower sets the
  // deadlines of what it does with it.
  virtual boost::asio::awaitable<core::UpstreamFailure> acquire(UpstreamLease& lease) = 0;
  // Drop every idle connection (the worker drained).
  virtual void close_idle() = 0;

 private:
  friend class UpstreamLease;
  // A lent connection back in the pool (UpstreamLease::give_back).
  virtual void take_back(UpstreamConnection&& connection) = 0;
};

inline void UpstreamLease::give_back() {
  if (!connection_) return;
  connection_->transport->expire_never();
  UpstreamConnection connection = std::move(*connection_);
  connection_.reset();
  owner_->take_back(std::move(connection));
}

}  // namespace idem::http
