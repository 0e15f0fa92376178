#pragma once
// The one upstream, as the exchange and plain forwarding see it: send a prepared request, get the
// whole response or a named failure. UpstreamPool is the real one; tests put a fake in its place
// to run the exchange in-process.
#include <boost/asio/awaitable.hpp>
#include <chrono>

#include "core/upstream_failure.hpp"
#include "http/message.hpp"
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
  // Drop every idle connection (the worker drained).
  virtual void close_idle() = 0;
};

}  // namespace idem::http
