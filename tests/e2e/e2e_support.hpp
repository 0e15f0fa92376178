#pragma once
// Request builders and response checks shared by the end-to-end tests.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support/http_client.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::e2e {

inline constexpr std::string_view kOrderBody = R"({"item":"book","quantity":1})";
inline constexpr std::string_view kProblemContentType = "application/problem+json";

// POST /orders (route "orders": key required, scoped by X-Tenant-Id) with a JSON body.
inline HttpRequest order(std::string_view key, std::string_view body = kOrderBody, std::string_view tenant = "t1") {
  return HttpRequest::post("/orders", std::string(body))
      .with("Idempotency-Key", std::string(key))
      .with("X-Tenant-Id", std::string(tenant));
}

// The upstream's default JSON body, or null when the body is not a JSON object.
inline boost::json::object upstream_json(const HttpResponse& response) {
  boost::system::error_code ec;
  auto value = boost::json::parse(response.body, ec);
  if (ec || !value.is_object()) return {};
  return std::move(value.as_object());
}

// The execution number the upstream wrote in its JSON body (0 when absent).
inline std::int64_t execution_of(const HttpResponse& response) {
  const auto body = upstream_json(response);
  const auto* execution = body.if_contains("execution");
  return execution != nullptr && execution->is_int64() ? execution->as_int64() : 0;
}

inline std::optional<std::string> string_member(const boost::json::object& object, std::string_view name) {
  const auto* value = object.if_contains(name);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return std::string(value->as_string());
}

inline bool iequals(std::string_view a, std::string_view b) {
  return !CaseInsensitiveLess{}(a, b) && !CaseInsensitiveLess{}(b, a);
}

inline bool is_replay(const HttpResponse& response) {
  return response.header("Idempotent-Replay") == std::optional<std::string>("true");
}

// Checks an RFC 9457 problem response from the proxy: status, content type, and the four members
// with type "urn:idemproxy:problem:<slug>". Returns the parsed body for further checks.
inline boost::json::object expect_problem(const HttpResponse& response, int status, std::string_view slug) {
  EXPECT_TRUE(response.ok()) << response.error;
  EXPECT_EQ(response.status, status) << describe(response);
  const auto content_type = response.header("Content-Type").value_or("");
  EXPECT_EQ(content_type.substr(0, kProblemContentType.size()), kProblemContentType) << describe(response);
  boost::system::error_code ec;
  auto value = boost::json::parse(response.body, ec);
  if (ec || !value.is_object()) {
    ADD_FAILURE() << "problem body is not a JSON object: " << describe(response);
    return {};
  }
  auto& problem = value.as_object();
  EXPECT_EQ(string_member(problem, "type"), "urn:idemproxy:problem:" + std::string(slug)) << describe(response);
  EXPECT_TRUE(string_member(problem, "title").has_value()) << describe(response);
  EXPECT_TRUE(string_member(problem, "detail").has_value()) << describe(response);
  const auto* problem_status = problem.if_contains("status");
  EXPECT_TRUE(problem_status != nullptr && problem_status->is_int64() && problem_status->as_int64() == status)
      << describe(response);
  return std::move(problem);
}

// First and replayed responses must agree on everything the upstream said. Headers the proxy
// itself owns on each hop (framing, connection, date, the replay marker) are not compared.
inline void expect_same_stored_response(const HttpResponse& first, const HttpResponse& replay) {
  EXPECT_EQ(replay.status, first.status);
  EXPECT_EQ(replay.body, first.body) << "replayed body differs";
  for (const auto& [name, value] : first.headers) {
    static constexpr std::string_view kPerHop[] = {"Content-Length", "Transfer-Encoding", "Connection",
                                                   "Keep-Alive",     "Date",              "Set-Cookie"};
    bool per_hop = false;
    for (const auto hop : kPerHop) per_hop = per_hop || iequals(name, hop);
    if (per_hop) continue;
    EXPECT_EQ(replay.header_values(name), first.header_values(name)) << "header " << name;
  }
}

}  // namespace idem::test::e2e
