#pragma once
// Reads idem-bench-upstream's execution count (GET /__count). Used before and after a run to check
// how many requests actually reached the upstream.
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <optional>

namespace idem::bench {

// nullopt when the upstream cannot be reached or answers anything but {"executions":N} in time.
std::optional<std::uint64_t> read_execution_count(const boost::asio::ip::tcp::endpoint& upstream,
                                                  std::chrono::nanoseconds timeout);

}  // namespace idem::bench
