#pragma once
// Starting idem-test-upstream and asking it for its execution counters.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "support/process.hpp"

namespace idem::test {

struct TestUpstream {
  Process process;
  std::uint16_t port = 0;
};

// Starts idem-test-upstream on 127.0.0.1:port (0 = ephemeral) and waits for its "listening" line.
// Throws std::runtime_error (with its logs) when it does not come up within timeout.
TestUpstream start_test_upstream(const std::filesystem::path& log_dir, std::uint16_t port = 0,
                                 std::string_view name = "upstream",
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The upstream's counters (control endpoints, not counted themselves). Throw std::runtime_error
// when the upstream cannot be asked.
std::uint64_t upstream_total(std::uint16_t upstream_port);
// Executions that received exactly this Idempotency-Key header value.
std::uint64_t upstream_count_for_key(std::uint16_t upstream_port, std::string_view key);
// Executions that received exactly this webhook-id header value.
std::uint64_t upstream_count_for_webhook_id(std::uint16_t upstream_port, std::string_view webhook_id);
void upstream_reset(std::uint16_t upstream_port);

}  // namespace idem::test
