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
  std::uint16_t port = 0;      // plain HTTP (also the control endpoints)
  std::uint16_t tls_port = 0;  // HTTPS, with the same counters; 0 without TLS
};

// HTTPS on a second port, in addition to the plain one.
struct TestUpstreamTls {
  std::filesystem::path cert_file;
  std::filesystem::path key_file;
  std::filesystem::path client_ca_file;  // set: a client certificate issued by this CA is required
};

// Starts idem-test-upstream on 127.0.0.1:port (0 = ephemeral) and waits for its "listening" line.
// Throws std::runtime_error (with its logs) when it does not come up within timeout.
TestUpstream start_test_upstream(const std::filesystem::path& log_dir, std::uint16_t port = 0,
                                 std::string_view name = "upstream",
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
// The same, serving HTTPS too (on an ephemeral port).
TestUpstream start_test_upstream_tls(const std::filesystem::path& log_dir, const TestUpstreamTls& tls,
                                     std::string_view name = "tls-upstream",
                                     std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The upstream's counters (control endpoints, not counted themselves). Throw std::runtime_error
// when the upstream cannot be asked.
std::uint64_t upstream_total(std::uint16_t upstream_port);
// TLS connections the upstream accepted (handshakes completed) since start or the last reset.
std::uint64_t upstream_tls_connections(std::uint16_t upstream_port);
// Executions that received exactly this Idempotency-Key header value.
std::uint64_t upstream_count_for_key(std::uint16_t upstream_port, std::string_view key);
// Executions that received exactly this webhook-id header value.
std::uint64_t upstream_count_for_webhook_id(std::uint16_t upstream_port, std::string_view webhook_id);
void upstream_reset(std::uint16_t upstream_port);

}  // namespace idem::test
