#include "support/upstream_process.hpp"

#include <boost/json.hpp>
#include <charconv>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/env.hpp"
#include "support/http_client.hpp"

namespace idem::test {

namespace {

constexpr std::chrono::milliseconds kControlTimeout{5'000};

std::uint64_t read_counter(std::uint16_t port, const std::string& target, std::string_view member) {
  const HttpResponse response = send(port, HttpRequest::get(target), kControlTimeout);
  if (!response.ok() || response.status != 200)
    throw std::runtime_error("idem-test-upstream " + target + ": " + describe(response));
  boost::system::error_code ec;
  const auto value = boost::json::parse(response.body, ec);
  const auto* object = value.if_object();
  const auto* counter = object != nullptr ? object->if_contains(member) : nullptr;
  if (ec || counter == nullptr || !counter->is_number())
    throw std::runtime_error("idem-test-upstream " + target + ": unexpected body " + response.body);
  return counter->to_number<std::uint64_t>();
}

// The port of the first stdout line containing `prefix` ("... 127.0.0.1:<port>").
std::uint16_t wait_for_port(Process& process, std::string_view prefix, std::chrono::milliseconds timeout) {
  const auto line = process.wait_for_stdout_line(prefix, timeout);
  if (!line) throw std::runtime_error("idem-test-upstream did not start:\n" + process.describe());
  const std::string_view text = *line;
  const auto digits = text.substr(text.rfind(':') + 1);
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || value == 0 || value > 65535)
    throw std::runtime_error("idem-test-upstream printed an unexpected line: " + *line);
  return static_cast<std::uint16_t>(value);
}

TestUpstream start(std::vector<std::string> args, const std::filesystem::path& log_dir, std::string_view name,
                   std::chrono::milliseconds timeout) {
  ProcessSpec spec;
  spec.executable = test_upstream_binary();
  spec.args = std::move(args);
  spec.log_dir = log_dir;
  spec.name = std::string(name);
  TestUpstream upstream{Process::start(spec), 0, 0};
  upstream.port = wait_for_port(upstream.process, "listening 127.0.0.1:", timeout);
  return upstream;
}

}  // namespace

TestUpstream start_test_upstream(const std::filesystem::path& log_dir, std::uint16_t port, std::string_view name,
                                 std::chrono::milliseconds timeout) {
  return start({"--listen", "127.0.0.1:" + std::to_string(port)}, log_dir, name, timeout);
}

TestUpstream start_test_upstream_tls(const std::filesystem::path& log_dir, const TestUpstreamTls& tls,
                                     std::string_view name, std::chrono::milliseconds timeout) {
  std::vector<std::string> args{"--listen",   "127.0.0.1:0",         "--tls-listen", "127.0.0.1:0",
                                "--tls-cert", tls.cert_file.string(), "--tls-key",    tls.key_file.string()};
  if (!tls.client_ca_file.empty()) {
    args.push_back("--tls-client-ca");
    args.push_back(tls.client_ca_file.string());
  }
  TestUpstream upstream = start(std::move(args), log_dir, name, timeout);
  // Printed before the plain port's line, so it is there already.
  upstream.tls_port = wait_for_port(upstream.process, "tls 127.0.0.1:", std::chrono::milliseconds(0));
  return upstream;
}

std::uint64_t upstream_total(std::uint16_t upstream_port) {
  return read_counter(upstream_port, "/__count", "total");
}

std::uint64_t upstream_tls_connections(std::uint16_t upstream_port) {
  return read_counter(upstream_port, "/__tls", "connections");
}

std::uint64_t upstream_count_for_key(std::uint16_t upstream_port, std::string_view key) {
  return read_counter(upstream_port, "/__count?key=" + percent_encode(key), "count");
}

std::uint64_t upstream_count_for_webhook_id(std::uint16_t upstream_port, std::string_view webhook_id) {
  return read_counter(upstream_port, "/__count?webhook_id=" + percent_encode(webhook_id), "count");
}

void upstream_reset(std::uint16_t upstream_port) {
  const HttpResponse response = send(upstream_port, HttpRequest::post("/__reset", "", ""), kControlTimeout);
  if (!response.ok() || response.status != 200)
    throw std::runtime_error("idem-test-upstream /__reset: " + describe(response));
}

}  // namespace idem::test
