#pragma once
// The storm: rounds of N concurrent duplicates of one fresh key. All N connections are opened
// first; the requests are written only once every connection is up, so they reach the proxy
// together. Each round must end with exactly one executed (non-replay) 200; the others get 409
// (in flight) or a replay byte-identical to it.
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "request_template.hpp"
#include "verification.hpp"

namespace idem::bench {

struct StormRoundResult {
  unsigned executed = 0;   // 200 without Idempotent-Replay
  unsigned replayed = 0;   // 200 with it
  unsigned conflicts = 0;  // 409
};

struct StormResult {
  PhaseStats stats;
  std::vector<StormRoundResult> rounds;
  std::chrono::nanoseconds elapsed{0};
};

struct StormSpec {
  boost::asio::ip::tcp::endpoint endpoint;
  const RequestTemplate* request = nullptr;
  std::string key_prefix;      // round r sends "<prefix>-s<r>"
  std::string executed_body;   // what the one executed 200 must carry
  unsigned connections = 2;
  unsigned rounds = 1;
  std::chrono::nanoseconds timeout{0};  // connect phase, then the requests: each round <= 2 x timeout + 1 s
};

StormResult run_storm(const StormSpec& spec);

}  // namespace idem::bench
