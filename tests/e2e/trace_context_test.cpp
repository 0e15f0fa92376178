// W3C trace context through idemproxy: traceparent/tracestate reach the upstream untouched (they
// are end-to-end headers), on a guarded route and a plain one, and the access log line carries a
// well-formed traceparent, so one trace id joins the request, its record and the events it wrote.
#include <gtest/gtest.h>

#include <string>

#include "e2e/e2e_support.hpp"
#include "support/eventually.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

using namespace std::chrono_literals;
using TraceContext = ProxyTest;

const std::string kTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// The values of `name` among the headers the upstream echoed.
std::vector<std::string> upstream_saw(const HttpResponse& response, std::string_view name) {
  std::vector<std::string> values;
  const auto body = upstream_json(response);
  const auto* headers = body.if_contains("headers");
  if (headers == nullptr || !headers->is_array()) return values;
  for (const auto& header : headers->as_array()) {
    if (iequals(header.as_array().at(0).as_string(), name)) values.emplace_back(header.as_array().at(1).as_string());
  }
  return values;
}

TEST_F(TraceContext, TraceparentReachesTheUpstreamUntouchedAndTheAccessLog) {
  const std::string key = unique_key("traced");
  const auto guarded = send(order(key)
                                .with("traceparent", kTraceparent)
                                .with("tracestate", "rojo=00f067aa0ba902b7")
                                .with(std::string(upstream::kEchoHeadersHeader), "1"));
  ASSERT_EQ(guarded.status, 200) << describe(guarded);
  EXPECT_EQ(upstream_saw(guarded, "traceparent"), std::vector<std::string>{kTraceparent});
  EXPECT_EQ(upstream_saw(guarded, "tracestate"), std::vector<std::string>{"rojo=00f067aa0ba902b7"});

  // Malformed: still forwarded as sent (idemproxy is no tracer), but not logged as a trace id.
  const std::string malformed = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01";
  const auto plain = send(HttpRequest::get("/plain/traced")
                              .with("traceparent", malformed)
                              .with(std::string(upstream::kEchoHeadersHeader), "1"));
  ASSERT_EQ(plain.status, 200) << describe(plain);
  EXPECT_EQ(upstream_saw(plain, "traceparent"), std::vector<std::string>{malformed});

  Process* proxy_process = proxy().proxy_process();
  ASSERT_NE(proxy_process, nullptr);
  std::string log;
  ASSERT_TRUE(eventually(
      [&] {
        log = proxy_process->stderr_text();
        return log.find("\"path\":\"/plain/traced\"") != std::string::npos;
      },
      5s))
      << log;
  const auto line_of = [&](std::string_view path) {
    const std::size_t at = log.find("\"path\":\"" + std::string(path) + "\"");
    const std::size_t start = log.rfind('\n', at) + 1;
    return log.substr(start, log.find('\n', at) - start);
  };
  EXPECT_NE(line_of("/orders").find("\"traceparent\":\"" + kTraceparent + "\""), std::string::npos) << log;
  EXPECT_NE(line_of("/plain/traced").find("\"traceparent\":\"\""), std::string::npos) << log;
}

}  // namespace
}  // namespace idem::test::e2e
