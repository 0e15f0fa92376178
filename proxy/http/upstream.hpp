#pragma once
// The one upstream, as the exchange and plain forwarding see it: send a prepared request, get the
// whole response or a named failure; or borrow a connection to stream a request and its response
// through (http/streamed_forwarding.hpp). UpstreamPool is the real one; tests put a fake in its
// place to run the exchange in-process.
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <memory>

#include "core/upstream_failure.hpp"
#include "http/message.hpp"
#include "http/upstream_connection.hpp"
#include "http/upstream_request.hpp"

namespace idem::http {

struct UpstreamResult {
  core::UpstreamFailure failure = core::UpstreamFailure::none;
  // failure == none: the answer, whole; or, with `rest`, its head (hop-by-hop fields still in)
  // and the body's first bytes.
  Response response;
  std::chrono::microseconds elapsed{0};
  // Set when the body goes on past what the exchange was asked to keep: the rest, to stream.
  std::unique_ptr<OpenResponse> rest;
};

// Called on the worker's io thread that owns it, one coroutine per request; an implementation
// keeps its own deadlines (an exchange always completes).
class Upstream {
 public:
  virtual ~Upstream() = default;
  // Sends the request and reads the answer, keeping at most `keep_up_to` bytes of its body: a
  // longer body comes back open (UpstreamResult::rest) as soon as that is known, its first bytes
  // read, the rest for the caller to stream. One deadline, `timeout` (the route's, else the
  // upstream's), covers the request and what is read here.
  virtual boost::asio::awaitable<UpstreamResult> exchange(const UpstreamRequest& request, std::size_t keep_up_to,
                                                          std::chrono::milliseconds timeout) = 0;
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
