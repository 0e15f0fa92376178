#include "support/proxy_fixture.hpp"

#include <iostream>
#include <sstream>
#include <stdexcept>

#include "support/env.hpp"
#include "support/ports.hpp"
#include "support/random_hex.hpp"

namespace idem::test {

namespace {

// A port picked by free_port() can be taken by a parallel test before the proxy binds it.
constexpr int kStartAttempts = 3;

constexpr std::string_view kDefaultConfig = R"(# e2e config rendered by tests/support/proxy_fixture.cpp
listen: 127.0.0.1:${PROXY_PORT}
workers: 2
admin: { listen: "127.0.0.1:0" }
upstream: { url: "http://127.0.0.1:${UPSTREAM_PORT}", connect_timeout: 1s, timeout: ${UPSTREAM_TIMEOUT} }
# Store timeouts below the defaults keep the timing model's shortest lease (README "Timing") under
# the 10s lease with a 5s upstream: 2 × 1s + 500ms + 1s + 5s + 1s margin = 9.5s.
store: { postgres: { dsn: ${PG_DSN}, pool_size: 4, prepared_statements: "${IDEMPROXY_TEST_PG_PREPARED:-true}", query_timeout: 1s, acquire_timeout: 500ms } }
defaults: { ttl: 1h, lease: 10s }
routes:
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
  - name: refunds
    match: { method: POST, path: "/orders/{id}/refunds" }
    scope: { headers: [X-Tenant-Id] }
    fingerprint: { headers: [Content-Type], ignore_json: [/client_timestamp] }
  - name: webhooks
    match: { method: POST, path: /webhooks/* }
    key_header: webhook-id
    key: optional
  - name: off-route
    match: { path: /plain/* }
    key: off
  - name: small
    match: { method: POST, path: /small }
    max_stored_body: 1KiB
    scope: { headers: [X-Tenant-Id] }
limits: { max_request_body: 8MiB }
)";

}  // namespace

std::string_view default_config_template() { return kDefaultConfig; }

std::string unique_key(std::string_view label) { return std::string(label) + "-" + random_hex(16); }

ProxyHarness::ProxyHarness(ProxyOptions options)
    : options_(std::move(options)), work_dir_("idem-e2e"), launcher_(work_dir_.path(), options_.env) {}

ProxyHarness::~ProxyHarness() { stop(); }

std::string ProxyHarness::render_config() const {
  std::map<std::string, std::string> variables{
      {"PROXY_PORT", std::to_string(proxy_port_)},
      {"UPSTREAM_PORT", std::to_string(configured_upstream_port_)},
      {"UPSTREAM_TIMEOUT", "5s"},
      {"PG_DSN", yaml_quoted(pg_dsn())},
  };
  for (const auto& [name, value] : options_.variables) variables[name] = value;
  const std::string_view source =
      options_.config_template.empty() ? default_config_template() : std::string_view(options_.config_template);
  // The suite runs again through PgBouncer in transaction mode (e2e_through_pgbouncer), which
  // needs prepared statements off: a store that ignores the switch fails there only by chance
  // (when a statement lands on a server session that lacks it twice in a row). Refused here, always.
  if (source.find("${PG_DSN}") != std::string_view::npos &&
      source.find("${IDEMPROXY_TEST_PG_PREPARED") == std::string_view::npos) {
    throw std::runtime_error(
        "this test's proxy config uses ${PG_DSN} without prepared_statements: "
        "\"${IDEMPROXY_TEST_PG_PREPARED:-true}\" (needed behind PgBouncer in transaction mode)");
  }
  return render_template(source, variables);
}

void ProxyHarness::start() {
  if (options_.start_upstream) {
    upstream_.emplace(start_test_upstream(work_dir_.path()));
    upstream_port_ = upstream_->port;
  } else {
    if (options_.upstream_port != 0) {
      upstream_port_ = options_.upstream_port;
    } else {
      upstream_reservation_.emplace();
      upstream_port_ = upstream_reservation_->port();
    }
  }
  configured_upstream_port_ = options_.route_upstream ? options_.route_upstream(upstream_port_) : upstream_port_;
  bool migrated = false;
  std::string last_failure;
  for (int attempt = 1; attempt <= kStartAttempts; ++attempt) {
    // Held until the proxy listens: a port merely found free could go to another test's proxy
    // too, and SO_REUSEPORT would let both listen on it, each answering half the other's requests.
    PortReservation reservation(true);
    proxy_port_ = reservation.port();
    launcher_.write_config_text(render_config());
    if (!migrated) {
      launcher_.migrate();
      migrated = true;
    }
    try {
      launcher_.start_listening(proxy_port_, "proxy-" + std::to_string(attempt));
      return;
    } catch (const std::runtime_error& e) {
      last_failure = e.what();
    }
  }
  throw std::runtime_error(last_failure);
}

std::optional<int> ProxyHarness::stop_proxy(std::chrono::milliseconds grace) { return launcher_.stop(grace); }

void ProxyHarness::stop() {
  stop_proxy();
  if (upstream_) upstream_->process.terminate(std::chrono::seconds(5));
}

void ProxyHarness::restart_proxy() { launcher_.start_listening(proxy_port_, "proxy-restarted"); }

void ProxyHarness::start_upstream_now() {
  if (upstream_ && upstream_->process.running()) return;
  if (upstream_reservation_) upstream_reservation_->release();
  upstream_.emplace(start_test_upstream(work_dir_.path(), upstream_port_, "late-upstream"));
}

std::uint64_t ProxyHarness::upstream_count(std::string_view key) const {
  return upstream_count_for_key(upstream_port_, key);
}

std::uint64_t ProxyHarness::upstream_webhook_count(std::string_view webhook_id) const {
  return upstream_count_for_webhook_id(upstream_port_, webhook_id);
}

std::uint64_t ProxyHarness::upstream_total() const { return test::upstream_total(upstream_port_); }

std::string ProxyHarness::diagnostics() {
  std::ostringstream out;
  out << launcher_.diagnostics();
  if (upstream_) out << "=== idem-test-upstream ===\n" << upstream_->process.describe(2048) << "\n";
  return out.str();
}

void ProxyTest::SetUp() {
  harness_ = std::make_unique<ProxyHarness>(proxy_options());
  harness_->start();
}

void ProxyTest::TearDown() {
  if (!harness_) return;
  harness_->stop();
  if (HasFailure()) std::cerr << harness_->diagnostics();
}

}  // namespace idem::test
