// What the proxy counts of its streams (http/body_abort.hpp, http/proxy_metrics.hpp): which side
// cut a body short, from how its pump ended; the body bytes of an exchange added to its route's
// counters once, under "-" when no route matched; the aborts by side and reason, every series
// there from the first scrape; the streams in progress.
#include <gtest/gtest.h>

#include <string>

#include "http/body_abort.hpp"
#include "http/proxy_metrics.hpp"
#include "http/request_trace.hpp"
#include "wire/body_pump.hpp"

namespace idem::http {
namespace {

using wire::PumpEnd;

// The value of one series as rendered, or -1 when it is absent.
double series_value(const std::string& text, const std::string& series) {
  const std::size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(BodyAbort, TheRequestBodysSourceIsTheClientAndItsSinkTheUpstream) {
  EXPECT_EQ(request_body_abort(PumpEnd::complete, false), BodyAbort{});
  EXPECT_EQ(request_body_abort(PumpEnd::source_failed, false), (BodyAbort{AbortSide::client, AbortCause::failed}));
  EXPECT_EQ(request_body_abort(PumpEnd::source_failed, true), (BodyAbort{AbortSide::client, AbortCause::timeout}));
  EXPECT_EQ(request_body_abort(PumpEnd::sink_failed, false), (BodyAbort{AbortSide::upstream, AbortCause::failed}));
  EXPECT_EQ(request_body_abort(PumpEnd::sink_failed, true), (BodyAbort{AbortSide::upstream, AbortCause::timeout}));
  // A body the client framed wrongly is refused (400, 413), not aborted.
  EXPECT_EQ(request_body_abort(PumpEnd::malformed, false), BodyAbort{});
}

TEST(BodyAbort, TheAnswerBodysSourceIsTheUpstreamUnlessTheClientWasSeenGoing) {
  EXPECT_EQ(answer_body_abort(PumpEnd::complete, false, false), BodyAbort{});
  EXPECT_EQ(answer_body_abort(PumpEnd::source_failed, false, false),
            (BodyAbort{AbortSide::upstream, AbortCause::failed}));
  EXPECT_EQ(answer_body_abort(PumpEnd::source_failed, true, false),
            (BodyAbort{AbortSide::upstream, AbortCause::timeout}));
  EXPECT_EQ(answer_body_abort(PumpEnd::malformed, false, false), (BodyAbort{AbortSide::upstream, AbortCause::failed}));
  EXPECT_EQ(answer_body_abort(PumpEnd::sink_failed, false, false), (BodyAbort{AbortSide::client, AbortCause::failed}));
  EXPECT_EQ(answer_body_abort(PumpEnd::sink_failed, true, false), (BodyAbort{AbortSide::client, AbortCause::timeout}));
  // The watch closed the upstream connection because the client's had closed: the client's doing.
  EXPECT_EQ(answer_body_abort(PumpEnd::source_failed, false, true), (BodyAbort{AbortSide::client, AbortCause::failed}));
}

TEST(StreamAccounting, BodyBytesAddUpPerRouteAndAbortsBySideAndReason) {
  ProxyMetrics metrics;
  const std::string empty = metrics.registry().render();
  // Every abort series is there before any abort (a rate over it starts at 0).
  for (const char* side : {"client", "upstream"}) {
    for (const char* reason : {"failed", "timeout"}) {
      EXPECT_EQ(series_value(empty, std::string("idemproxy_bodies_aborted_total{side=\"") + side + "\",reason=\"" +
                                        reason + "\"}"),
                0)
          << side << " " << reason << "\n"
          << empty;
    }
  }
  EXPECT_EQ(series_value(empty, "idemproxy_active_streams"), 0);

  RequestTrace download;
  download.route = "files";
  download.bodies = {.in = 0, .out = 1'000'000, .aborted = {}};
  RequestTrace upload;
  upload.route = "files";
  upload.bodies = {.in = 700, .out = 31, .aborted = {}};
  RequestTrace unrouted;  // route "-"
  unrouted.bodies = {.in = 5, .out = 300, .aborted = {AbortSide::upstream, AbortCause::failed}};
  RequestTrace slow_reader;
  slow_reader.route = "files";
  slow_reader.decision = decision::executed;  // another label set of the same route
  slow_reader.bodies = {.in = 2, .out = 64, .aborted = {AbortSide::client, AbortCause::timeout}};
  for (const RequestTrace* trace : {&download, &upload, &unrouted, &slow_reader}) metrics.record_bodies(*trace);

  const std::string text = metrics.registry().render();
  EXPECT_EQ(series_value(text, "idemproxy_request_body_bytes_total{route=\"files\"}"), 702) << text;
  EXPECT_EQ(series_value(text, "idemproxy_response_body_bytes_total{route=\"files\"}"), 1'000'095) << text;
  EXPECT_EQ(series_value(text, "idemproxy_request_body_bytes_total{route=\"-\"}"), 5) << text;
  EXPECT_EQ(series_value(text, "idemproxy_response_body_bytes_total{route=\"-\"}"), 300) << text;
  EXPECT_EQ(series_value(text, "idemproxy_bodies_aborted_total{side=\"upstream\",reason=\"failed\"}"), 1) << text;
  EXPECT_EQ(series_value(text, "idemproxy_bodies_aborted_total{side=\"client\",reason=\"timeout\"}"), 1) << text;
  EXPECT_EQ(series_value(text, "idemproxy_bodies_aborted_total{side=\"client\",reason=\"failed\"}"), 0) << text;
  EXPECT_EQ(series_value(text, "idemproxy_bodies_aborted_total{side=\"upstream\",reason=\"timeout\"}"), 0) << text;
  EXPECT_NE(text.find("# TYPE idemproxy_request_body_bytes_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE idemproxy_active_streams gauge"), std::string::npos);
}

TEST(StreamAccounting, AnActiveStreamCountsWhileItLives) {
  ProxyMetrics metrics;
  {
    const ActiveStream first(metrics);
    const ActiveStream second(metrics);
    EXPECT_EQ(series_value(metrics.registry().render(), "idemproxy_active_streams"), 2);
  }
  EXPECT_EQ(series_value(metrics.registry().render(), "idemproxy_active_streams"), 0);
}

}  // namespace
}  // namespace idem::http
