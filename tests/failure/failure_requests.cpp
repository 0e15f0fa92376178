#include "failure/failure_requests.hpp"

#include <boost/json.hpp>
#include <charconv>
#include <thread>

#include "support/upstream_protocol.hpp"

namespace idem::test::failure {

namespace {
constexpr std::chrono::milliseconds kSettlePollInterval{100};

std::optional<std::uint64_t> parse_number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}
}  // namespace

HttpRequest keyed_post(std::string_view path, std::string_view key, std::string_view body) {
  return HttpRequest::post(std::string(path), std::string(body)).with("Idempotency-Key", std::string(key));
}

std::string problem_slug(const HttpResponse& response) {
  if (response.header("Content-Type").value_or("").rfind("application/problem+json", 0) != 0) return {};
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(response.body, ec);
  if (ec || !parsed.is_object()) return {};
  const auto* type = parsed.as_object().if_contains("type");
  if (type == nullptr || !type->is_string()) return {};
  const std::string_view text = type->as_string();
  if (!text.starts_with(kProblemPrefix)) return {};
  return std::string(text.substr(kProblemPrefix.size()));
}

bool is_replay(const HttpResponse& response) { return response.header("Idempotent-Replay") == "true"; }

bool is_unchecked(const HttpResponse& response) { return response.header("Idempotency-Status") == "unchecked"; }

std::optional<long> retry_after_seconds(const HttpResponse& response) {
  const auto value = response.header("Retry-After");
  if (!value) return std::nullopt;
  const auto seconds = parse_number(*value);
  if (!seconds) return std::nullopt;
  return static_cast<long>(*seconds);
}

std::uint64_t execution_of(const HttpResponse& response) {
  const auto value = response.header(upstream::kExecutionHeader);
  return value ? parse_number(*value).value_or(0) : 0;
}

HttpResponse send_until_settled(std::uint16_t port, const HttpRequest& request, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto unsettled = [](const HttpResponse& response) {
    const std::string slug = problem_slug(response);
    return (response.status == 409 && slug == "request-in-flight") ||
           (response.status == 503 && slug == "store-unavailable");
  };
  HttpResponse response = send(port, request);
  while (unsettled(response) && std::chrono::steady_clock::now() + kSettlePollInterval < deadline) {
    std::this_thread::sleep_for(kSettlePollInterval);
    response = send(port, request);
  }
  return response;
}

long long elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

HttpResponse send_while_refused(std::uint16_t port, const HttpRequest& request,
                                std::chrono::steady_clock::time_point deadline) {
  HttpResponse response;
  while (std::chrono::steady_clock::now() < deadline) {
    response = send(port, request);
    if (response.status != 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return response;
}

}  // namespace idem::test::failure
