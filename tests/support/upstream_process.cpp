#include "support/upstream_process.hpp"

#include <boost/json.hpp>
#include <charconv>
#include <stdexcept>
#include <string>

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

}  // namespace

TestUpstream start_test_upstream(const std::filesystem::path& log_dir, std::uint16_t port, std::string_view name,
                                 std::chrono::milliseconds timeout) {
  ProcessSpec spec;
  spec.executable = test_upstream_binary();
  spec.args = {"--listen", "127.0.0.1:" + std::to_string(port)};
  spec.log_dir = log_dir;
  spec.name = std::string(name);
  TestUpstream upstream{Process::start(spec), 0};
  const auto line = upstream.process.wait_for_stdout_line("listening 127.0.0.1:", timeout);
  if (!line) throw std::runtime_error("idem-test-upstream did not start:\n" + upstream.process.describe());
  const std::string_view text = *line;
  const auto digits = text.substr(text.rfind(':') + 1);
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || value == 0 || value > 65535)
    throw std::runtime_error("idem-test-upstream printed an unexpected line: " + *line);
  upstream.port = static_cast<std::uint16_t>(value);
  return upstream;
}

std::uint64_t upstream_total(std::uint16_t upstream_port) {
  return read_counter(upstream_port, "/__count", "total");
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
