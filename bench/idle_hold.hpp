#pragma once
// Idle keep-alive connections for the memory measurement: open N connections, each carrying one
// verified request (so the server holds a real keep-alive session, not a bare accept), with a
// bounded number in progress at once, then hold them all open and idle for a while.
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>

#include "request_plan.hpp"
#include "request_template.hpp"
#include "verification.hpp"

namespace idem::bench {

struct IdleSpec {
  boost::asio::ip::tcp::endpoint endpoint;
  const RequestTemplate* request = nullptr;
  RequestPlan* plan = nullptr;
  unsigned connections = 1;
  std::chrono::nanoseconds hold{0};
  std::chrono::nanoseconds timeout{0};  // per connect and per request
};

struct IdleResult {
  PhaseStats stats;
  unsigned established = 0;  // connections open (and verified) when the hold began
  std::chrono::nanoseconds setup{0};
};

// `on_held` is called once every connection is up (before the hold), `tick` about once a second
// during the hold; both on the calling thread (RSS sampling).
IdleResult run_idle_hold(const IdleSpec& spec, const std::function<void()>& on_held, const std::function<void()>& tick);

}  // namespace idem::bench
