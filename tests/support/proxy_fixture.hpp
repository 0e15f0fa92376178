#pragma once
// Runs the real idemproxy binary against a fresh idem-test-upstream and the test Postgres:
// renders a YAML config from a template, applies the schema (--migrate), starts both processes,
// and stops them (SIGTERM, then SIGKILL) at the end; the proxy through support/proxy_launcher.
// ProxyTest wraps it as a gtest fixture.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/http_client.hpp"
#include "support/ports.hpp"
#include "support/process.hpp"
#include "support/proxy_launcher.hpp"
#include "support/temp_dir.hpp"
#include "support/upstream_process.hpp"

namespace idem::test {

// The e2e configuration. Placeholders: ${PROXY_PORT}, ${UPSTREAM_PORT}, ${UPSTREAM_TIMEOUT},
// ${PG_DSN} (replaced by a quoted YAML scalar). Any other ${...} is left for the proxy's own
// environment expansion.
std::string_view default_config_template();

struct ProxyOptions {
  std::string config_template;  // empty: default_config_template()
  std::map<std::string, std::string> variables;  // extra or overriding ${NAME} values
  bool start_upstream = true;
  // With start_upstream == false: the port the config points the proxy at (0 = a free port that
  // nothing listens on, until start_upstream_now()).
  std::uint16_t upstream_port = 0;
  EnvVars env;  // extra environment for idemproxy
  // Given the upstream's port, the port the proxy is told to use instead (e.g. a FaultProxy's in
  // front of it, capturing what the upstream receives); unset: the upstream's own.
  std::function<std::uint16_t(std::uint16_t upstream_port)> route_upstream;
};

class ProxyHarness {
 public:
  explicit ProxyHarness(ProxyOptions options = {});
  ~ProxyHarness();
  ProxyHarness(const ProxyHarness&) = delete;
  ProxyHarness& operator=(const ProxyHarness&) = delete;

  // Migrates, starts the upstream (unless disabled) and the proxy, and waits until the proxy
  // accepts connections. Throws std::runtime_error with the processes' logs on failure.
  void start();
  // Stops the proxy (SIGTERM, SIGKILL after a grace period) and the upstream. Idempotent.
  void stop();
  // Stops only the proxy; its exit status (128 + signal when killed). nullopt if never started.
  std::optional<int> stop_proxy(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Starts the proxy again from the same config on the same port (after stop_proxy or a kill) and
  // waits until it accepts connections.
  void restart_proxy();
  // Starts idem-test-upstream on upstream_port() (used when the test began without one).
  void start_upstream_now();

  std::uint16_t proxy_port() const { return proxy_port_; }
  std::uint16_t upstream_port() const { return upstream_port_; }
  const std::filesystem::path& config_path() const { return launcher_.config_path(); }
  const std::string& config_text() const { return launcher_.config_text(); }
  const std::filesystem::path& work_dir() const { return work_dir_.path(); }
  Process* proxy_process() { return launcher_.started() > 0 ? &launcher_.last() : nullptr; }

  std::uint64_t upstream_count(std::string_view key) const;
  std::uint64_t upstream_webhook_count(std::string_view webhook_id) const;
  std::uint64_t upstream_total() const;

  // Everything worth printing when a test failed: config and both processes' logs.
  std::string diagnostics();

 private:
  std::string render_config() const;
  std::uint16_t configured_upstream_port_ = 0;  // what the config names: route_upstream's port, or the upstream's

  ProxyOptions options_;
  TempDir work_dir_;
  std::uint16_t proxy_port_ = 0;
  std::uint16_t upstream_port_ = 0;
  std::optional<TestUpstream> upstream_;
  // With start_upstream == false and no upstream_port: the upstream's port, held until
  // start_upstream_now() (a port merely found free went to the proxy's own admin listener once).
  std::optional<PortReservation> upstream_reservation_;
  ProxyLauncher launcher_;  // declared after work_dir_: its processes go first
};

// "<label>-<16 random hex digits>": keys that no other test (or earlier run) used, since every
// test shares the one database.
std::string unique_key(std::string_view label);

// gtest fixture: one proxy + upstream per test. Override proxy_options() to change the config.
class ProxyTest : public ::testing::Test {
 protected:
  virtual ProxyOptions proxy_options() const { return {}; }

  void SetUp() override;
  void TearDown() override;

  ProxyHarness& proxy() { return *harness_; }
  // One request on a fresh connection to the proxy.
  HttpResponse send(const HttpRequest& request, std::chrono::milliseconds timeout = kDefaultHttpTimeout) {
    return test::send(harness_->proxy_port(), request, timeout);
  }
  std::uint64_t upstream_count(std::string_view key) const { return harness_->upstream_count(key); }
  std::uint64_t upstream_webhook_count(std::string_view id) const { return harness_->upstream_webhook_count(id); }
  std::uint64_t upstream_total() const { return harness_->upstream_total(); }

 private:
  std::unique_ptr<ProxyHarness> harness_;
};

}  // namespace idem::test
