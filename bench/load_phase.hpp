#pragma once
// A closed- or open-loop load phase: N keep-alive connections spread over T io threads, each
// sending the requests its plan describes until the duration (or the request budget) runs out,
// verifying every response and recording the latency of the verified ones.
//
// Bounds: a watchdog per thread closes any connection whose connect or request exceeds the
// timeout; past stop + timeout + 1 s everything is closed, and each thread's io_context gives up
// one second later whatever remains. A phase therefore never outlives duration + timeout + 2 s.
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>

#include "request_plan.hpp"
#include "request_template.hpp"
#include "verification.hpp"

namespace idem::bench {

struct LoadPhaseSpec {
  boost::asio::ip::tcp::endpoint endpoint;
  const RequestTemplate* request = nullptr;
  RequestPlan* plan = nullptr;
  unsigned connections = 1;
  unsigned threads = 1;
  // > 0: open loop. Connection c sends its k-th request at start + (c + k * connections) / rate,
  // and that intended instant (not the actual send) is where its latency starts.
  double rate = 0;
  std::chrono::nanoseconds duration{0};
  std::uint64_t max_requests = 0;  // 0: no budget, the duration alone bounds the phase
  std::chrono::nanoseconds timeout{0};
};

struct PhaseResult {
  PhaseStats stats;
  std::chrono::nanoseconds elapsed{0};  // phase start to the last connection finishing
};

// Blocks until the phase is over. `tick`, when set, is called about once a second from the calling
// thread while the phase runs (RSS sampling).
PhaseResult run_load_phase(const LoadPhaseSpec& spec, const std::function<void()>& tick = {});

// Resolves a target once, at start-up (throws on failure: not on the data path).
boost::asio::ip::tcp::endpoint resolve_endpoint(const std::string& host, std::uint16_t port);

}  // namespace idem::bench
