// The load generator's own logic, without sockets: the histogram's precision and percentiles, the
// response checks, the request bytes, the key plans, and the command line's bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench_protocol.hpp"
#include "histogram.hpp"
#include "loadgen_options.hpp"
#include "request_plan.hpp"
#include "request_template.hpp"
#include "verification.hpp"

namespace idem::bench {
namespace {

TEST(LatencyHistogram, EveryValueIsKnownToWithinOnePercent) {
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> exponent(3.0, 10.7);  // 1 µs .. 50 s, log-uniform
  for (int i = 0; i < 20000; ++i) {
    const auto value = static_cast<std::uint64_t>(std::pow(10.0, exponent(random)));
    LatencyHistogram histogram;
    histogram.record(value);
    histogram.record(LatencyHistogram::kMaxValueNs);  // so the single value is not also the max
    const std::uint64_t reported = histogram.value_at_percentile(50);
    ASSERT_GE(reported, value);
    ASSERT_LE(static_cast<double>(reported - value), static_cast<double>(value) * 0.01) << value;
  }
}

TEST(LatencyHistogram, PercentilesOfAKnownDistribution) {
  LatencyHistogram histogram;
  for (std::uint64_t us = 1; us <= 1000; ++us) histogram.record(us * 1000);  // 1..1000 µs, once each
  EXPECT_EQ(histogram.count(), 1000u);
  EXPECT_EQ(histogram.min(), 1000u);
  EXPECT_EQ(histogram.max(), 1'000'000u);
  EXPECT_NEAR(static_cast<double>(histogram.value_at_percentile(50)), 500'000, 500'000 * 0.01);
  EXPECT_NEAR(static_cast<double>(histogram.value_at_percentile(90)), 900'000, 900'000 * 0.01);
  EXPECT_NEAR(static_cast<double>(histogram.value_at_percentile(99)), 990'000, 990'000 * 0.01);
  EXPECT_EQ(histogram.value_at_percentile(100), 1'000'000u);
  EXPECT_EQ(histogram.value_at_percentile(0), 1000u);
  EXPECT_NEAR(histogram.mean(), 500'500'000.0 / 1000, 1.0);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverythingInOne) {
  LatencyHistogram a, b, all;
  for (std::uint64_t v = 1; v < 100000; v += 7) {
    (v % 2 ? a : b).record(v * 13);
    all.record(v * 13);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double p : {10.0, 50.0, 99.0, 99.9}) EXPECT_EQ(a.value_at_percentile(p), all.value_at_percentile(p)) << p;
}

TEST(LatencyHistogram, ClampsBeyondTheCapAndCountsIt) {
  LatencyHistogram histogram;
  histogram.record(LatencyHistogram::kMaxValueNs * 3);
  EXPECT_EQ(histogram.clamped(), 1u);
  EXPECT_EQ(histogram.max(), LatencyHistogram::kMaxValueNs);
}

TEST(LatencyHistogram, BucketsCoverEveryRecordedValue) {
  LatencyHistogram histogram;
  const std::vector<std::uint64_t> values{0, 1, 255, 256, 257, 1000, 65'432, 9'999'999, 59'000'000'000};
  for (auto v : values) histogram.record(v);
  const auto buckets = histogram.buckets();
  std::uint64_t counted = 0;
  for (const auto& bucket : buckets) {
    counted += bucket.count;
    EXPECT_LE(bucket.lowest_ns, bucket.highest_ns);
  }
  EXPECT_EQ(counted, values.size());
  for (auto v : values) {
    const bool covered = std::any_of(buckets.begin(), buckets.end(),
                                     [v](const auto& b) { return b.lowest_ns <= v && v <= b.highest_ns; });
    EXPECT_TRUE(covered) << v;
  }
}

Response make_response(unsigned status, std::string body, bool replay) {
  Response response{static_cast<boost::beast::http::status>(status), 11};
  if (replay) response.set(kReplayHeader, "true");
  response.body() = std::move(body);
  return response;
}

TEST(CheckResponse, AcceptsOnlyTheExpectedStatusReplayFlagAndBody) {
  const std::string body{kUpstreamBody};
  const Expectation first{200, ReplayExpectation::absent, body};
  const Expectation replay{200, ReplayExpectation::present, body};
  EXPECT_EQ(check_response(make_response(200, body, false), first), std::nullopt);
  EXPECT_EQ(check_response(make_response(200, body, true), replay), std::nullopt);
  EXPECT_EQ(check_response(make_response(409, body, false), first), ErrorKind::bad_status);
  EXPECT_EQ(check_response(make_response(200, body, true), first), ErrorKind::replay_header_unexpected);
  EXPECT_EQ(check_response(make_response(200, body, false), replay), ErrorKind::replay_header_missing);
  EXPECT_EQ(check_response(make_response(200, body + " ", true), replay), ErrorKind::body_mismatch);
}

LoadgenOptions options_for(std::vector<std::string> args) {
  args.insert(args.begin(), "idem-loadgen");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  auto parsed = parse_options(static_cast<int>(argv.size()), argv.data());
  if (!parsed.options) throw std::runtime_error(parsed.error);
  return *parsed.options;
}

std::string parse_error(std::vector<std::string> args) {
  args.insert(args.begin(), "idem-loadgen");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  auto parsed = parse_options(static_cast<int>(argv.size()), argv.data());
  return parsed.options ? std::string() : parsed.error;
}

TEST(RequestTemplate, RendersAFramedRequestWithOrWithoutTheKey) {
  const auto options = options_for({"--target", "127.0.0.1:8080", "--path", "/keyed", "--header", "X-Tenant: a"});
  const RequestTemplate request(options);
  std::string bytes;
  request.render("k-1", bytes);
  EXPECT_EQ(bytes,
            "POST /keyed HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n"
            "Content-Length: 14\r\nX-Tenant: a\r\nIdempotency-Key: k-1\r\n\r\n{\"amount\":100}");
  request.render("", bytes);
  EXPECT_EQ(bytes.find("Idempotency-Key"), std::string::npos);
  EXPECT_TRUE(bytes.ends_with("\r\n\r\n{\"amount\":100}"));
}

TEST(RequestTemplate, AKeyInTheBodyIsEachRequestsKeyWithItsOwnLength) {
  const auto options = options_for(
      {"--target", "127.0.0.1:8080", "--path", "/keyed", "--body", "{\"order\":\"{key}\",\"amount\":1}"});
  const RequestTemplate request(options);
  std::string bytes;
  request.render("k-12345", bytes);
  EXPECT_EQ(bytes,
            "POST /keyed HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n"
            "Content-Length: 30\r\nIdempotency-Key: k-12345\r\n\r\n{\"order\":\"k-12345\",\"amount\":1}");
  request.render("k-1", bytes);
  EXPECT_TRUE(bytes.ends_with("Content-Length: 26\r\nIdempotency-Key: k-1\r\n\r\n{\"order\":\"k-1\",\"amount\":1}"))
      << bytes;
}

TEST(RequestPlans, UniqueKeysNeverRepeatAcrossConnectionsAndRequests) {
  UniqueKeyPlan plan("run", 200, "b");
  std::set<std::string> keys;
  std::string key;
  Expectation expected;
  for (unsigned c = 0; c < 12; ++c) {
    for (std::uint64_t s = 0; s < 12; ++s) {
      ASSERT_TRUE(plan.next(c, s, key, expected));
      EXPECT_EQ(expected.replay, ReplayExpectation::absent);
      keys.insert(key);
    }
  }
  EXPECT_EQ(keys.size(), 144u);
}

TEST(RequestPlans, CompletionSendsEveryKeyExactlyOnceThenReplaysCycleThroughThem) {
  constexpr std::size_t kKeys = 10;
  constexpr unsigned kConnections = 3;
  ReplayCompletionPlan completion("run", kKeys, kConnections, 200, "body");
  std::multiset<std::string> sent;
  std::string key;
  Expectation expected;
  for (unsigned c = 0; c < kConnections; ++c) {
    std::uint64_t s = 0;
    while (completion.next(c, s, key, expected)) {
      sent.insert(key);
      completion.on_verified(c, s, make_response(200, "body of " + key, false));
      ++s;
      ASSERT_LT(s, 100u);
    }
  }
  ASSERT_EQ(sent.size(), kKeys);
  for (std::size_t i = 0; i < kKeys; ++i) EXPECT_EQ(sent.count(replay_key("run", i)), 1u);

  std::vector<std::string> bodies;
  for (auto& body : completion.take_bodies()) {
    ASSERT_TRUE(body.has_value());
    bodies.push_back(*body);
  }
  ReplayPlan replay("run", bodies, kConnections, 200);
  std::set<std::string> replayed;
  for (unsigned c = 0; c < kConnections; ++c) {
    for (std::uint64_t s = 0; s < kKeys; ++s) {
      ASSERT_TRUE(replay.next(c, s, key, expected));
      EXPECT_EQ(expected.replay, ReplayExpectation::present);
      EXPECT_EQ(expected.body, "body of " + key);  // each key expects the body it was completed with
      replayed.insert(key);
    }
  }
  EXPECT_EQ(replayed.size(), kKeys);
}

TEST(PaddedBody, IsExactlyTheAskedSizeAndStillTheUpstreamObject) {
  for (std::size_t bytes : {40u, 41u, 1000u, 16384u}) {
    const std::string body = padded_body(bytes);
    EXPECT_EQ(body.size(), bytes);
    EXPECT_TRUE(body.starts_with(R"({"ok":true,"id":12345,"pad":")"));
    EXPECT_TRUE(body.ends_with(R"("})"));
  }
  EXPECT_EQ(padded_body(5), kUpstreamBody);
  const auto options = options_for({"--target", "127.0.0.1:1", "--body-bytes", "1000"});
  EXPECT_EQ(options.expect_body, padded_body(1000));
  ASSERT_EQ(options.headers.size(), 1u);
  EXPECT_EQ(options.headers[0].first, kBodyBytesHeader);
  EXPECT_EQ(options.headers[0].second, "1000");
}

TEST(LoadgenOptions, DerivesTheModeAndRefusesWhatCannotRun) {
  EXPECT_EQ(options_for({"--target", "127.0.0.1:1"}).mode(), LoadMode::closed);
  EXPECT_EQ(options_for({"--target", "127.0.0.1:1", "--rate", "100"}).mode(), LoadMode::open);
  EXPECT_EQ(options_for({"--target", "127.0.0.1:1", "--keys", "same", "--connections", "8"}).mode(), LoadMode::storm);
  EXPECT_EQ(options_for({"--target", "127.0.0.1:1", "--idle-connections", "5"}).mode(), LoadMode::idle);
  EXPECT_EQ(options_for({"--target", "127.0.0.1:1", "--keys", "replay:7"}).replay_keys, 7u);

  EXPECT_NE(parse_error({}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:0"}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--keys", "replay:0"}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--keys", "same"}), "");  // one connection: no duplicate
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--duration", "0"}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--duration", "7200"}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--connections", "99999"}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--header", "Bad\r\nInjected: 1"}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--bogus", "1"}), "");
}

TEST(LoadgenOptions, TakesACountedWarmUpAndTheCommandsAroundTheMeasuredPhase) {
  const auto options = options_for({"--target", "127.0.0.1:1", "--requests", "2000", "--warmup-requests", "500",
                                    "--before-measure", "callgrind_control -z 42", "--after-measure", "callgrind_control -d 42"});
  EXPECT_EQ(options.max_requests, 2000u);
  EXPECT_EQ(options.warmup_requests, 500u);
  EXPECT_EQ(options.before_measure, "callgrind_control -z 42");
  EXPECT_EQ(options.after_measure, "callgrind_control -d 42");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--warmup-requests", "-1"}), "");
  EXPECT_NE(parse_error({"--target", "127.0.0.1:1", "--before-measure", ""}), "");
}

}  // namespace
}  // namespace idem::bench
