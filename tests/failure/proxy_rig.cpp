#include "failure/proxy_rig.hpp"

#include <boost/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "support/env.hpp"
#include "support/ports.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::failure {

namespace {

constexpr std::string_view kConfigTemplate = R"(# failure-test config rendered by tests/failure/proxy_rig.cpp
listen: 127.0.0.1:${PROXY_PORT}
workers: ${WORKERS}
drain_timeout: ${DRAIN_TIMEOUT}
upstream:
  url: "http://127.0.0.1:${UPSTREAM_PORT}"
  connect_timeout: 500ms
  timeout: ${UPSTREAM_TIMEOUT}
  max_connections: ${UPSTREAM_MAX_CONNECTIONS}
limits: { max_waiting: ${MAX_WAITING} }
store:
  postgres:
    dsn: ${PG_DSN}
    pool_size: ${POOL_SIZE}
    connect_timeout: ${PG_CONNECT_TIMEOUT}
    query_timeout: ${PG_QUERY_TIMEOUT}
    acquire_timeout: ${PG_ACQUIRE_TIMEOUT}
${STORE_REDIS}
replay_cache: { max_bytes: 0 }
reaper: { interval: ${REAPER_INTERVAL}, batch: 100 }
admin: { listen: "${ADMIN_LISTEN}" }
defaults: { ttl: ${TTL}, lease: ${LEASE} }
routes:
  - name: lock
    match: { method: POST, path: /lock }
    unknown_outcome: lock
    store_unavailable: fail_closed
  - name: retry
    match: { method: POST, path: /retry }
    unknown_outcome: retry
  - name: open
    match: { method: POST, path: /open }
    store_unavailable: fail_open
  - name: wait
    match: { method: POST, path: /wait }
    in_flight: wait
    wait_timeout: ${WAIT_TIMEOUT}
  - name: wait-retry
    match: { method: POST, path: /wait-retry }
    in_flight: wait
    unknown_outcome: retry
    wait_timeout: ${WAIT_TIMEOUT}
)";

const std::map<std::string, std::string>& default_variables() {
  static const std::map<std::string, std::string> defaults{
      {"UPSTREAM_TIMEOUT", "1s"},     {"LEASE", "5s"},
      {"DRAIN_TIMEOUT", "10s"},       {"WAIT_TIMEOUT", "5s"},
      {"WORKERS", "2"},               {"POOL_SIZE", "4"},
      {"PG_CONNECT_TIMEOUT", "1s"},   {"PG_QUERY_TIMEOUT", "1s"},
      {"PG_ACQUIRE_TIMEOUT", "500ms"}, {"UPSTREAM_MAX_CONNECTIONS", "64"},
      {"MAX_WAITING", "1024"},       {"REAPER_INTERVAL", "0s"},
      {"STORE_REDIS", ""},           {"TTL", "1h"},
      {"ADMIN_LISTEN", "off"},
  };
  return defaults;
}

}  // namespace

std::string_view failure_config_template() { return kConfigTemplate; }

ProxyRig::ProxyRig(RigOptions options)
    : options_(std::move(options)), work_dir_("idem-failure"), launcher_(work_dir_.path()) {}

// Each Process SIGKILLs and reaps its child when destroyed.
ProxyRig::~ProxyRig() = default;

void ProxyRig::start() {
  if (options_.start_upstream) {
    upstream_.emplace(start_test_upstream(work_dir_.path()));
    upstream_port_ = upstream_->port;
  } else {
    upstream_port_ = free_port();
  }
  proxy_port_ = free_port();

  std::map<std::string, std::string> variables = default_variables();
  for (const auto& [name, value] : options_.variables) variables[name] = value;
  variables["PROXY_PORT"] = std::to_string(proxy_port_);
  variables["UPSTREAM_PORT"] = std::to_string(options_.route_upstream ? options_.route_upstream(upstream_port_) : upstream_port_);
  variables["PG_DSN"] = yaml_quoted(options_.pg_dsn.empty() ? pg_dsn() : options_.pg_dsn);
  launcher_.write_config(kConfigTemplate, variables);
  launcher_.migrate();
  start_proxy();
}

void ProxyRig::start_proxy() {
  if (launcher_.started() > 0 && launcher_.last().running()) {
    throw std::logic_error("start_proxy: a proxy is already running");
  }
  launcher_.start_listening(proxy_port_, "proxy-" + std::to_string(launcher_.started() + 1));
}

void ProxyRig::kill_proxy() {
  Process& process = proxy();
  process.kill9();
  if (!process.wait_exit(std::chrono::seconds(10))) throw std::runtime_error("idemproxy survived SIGKILL");
}

void ProxyRig::signal_proxy(int signo) { proxy().signal(signo); }

Process& ProxyRig::proxy() { return launcher_.last(); }

void ProxyRig::start_upstream() {
  if (upstream_ && upstream_->process.running()) return;
  upstream_.emplace(start_test_upstream(work_dir_.path(), upstream_port_, "late-upstream"));
}

std::uint64_t ProxyRig::upstream_count(std::string_view key) const {
  return upstream_count_for_key(upstream_port_, key);
}

std::uint64_t ProxyRig::upstream_total() const { return test::upstream_total(upstream_port_); }

RecordInspection ProxyRig::inspect(std::string_view route, std::string_view key) const {
  // The rig's clients send Host 127.0.0.1:<port>; the routes scope keys by host.
  const RunResult result =
      launcher_.run({"--inspect", std::string(route), std::string(key), "--header", "Host: 127.0.0.1"}, "inspect");
  RecordInspection inspection;
  inspection.exit_status = result.exit_status;
  inspection.output = describe_run(result);
  if (result.exit_status != 0) return inspection;
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(result.stdout_text, ec);
  if (ec || !parsed.is_object()) return inspection;
  const auto& record = parsed.as_object();
  if (const auto* state = record.if_contains("state"); state != nullptr && state->is_string()) {
    inspection.state = std::string(state->as_string());
  }
  const auto number = [&](std::string_view name) -> std::int64_t {
    const auto* value = record.if_contains(name);
    return value != nullptr && value->is_int64() ? value->as_int64() : 0;
  };
  inspection.lease_expires_at_ms = number("lease_expires_at_ms");
  inspection.created_at_ms = number("created_at_ms");
  inspection.expires_at_ms = number("expires_at_ms");
  return inspection;
}

RunResult ProxyRig::release(std::string_view route, std::string_view key) const {
  return launcher_.run({"--release", std::string(route), std::string(key), "--header", "Host: 127.0.0.1"}, "release");
}

std::string ProxyRig::proxy_logs() const { return launcher_.logs(); }

std::string ProxyRig::diagnostics() {
  std::ostringstream out;
  out << launcher_.diagnostics(3, 6144);
  if (upstream_) out << "=== idem-test-upstream ===\n" << upstream_->process.describe(2048) << "\n";
  return out.str();
}

}  // namespace idem::test::failure
