// What the proxy tells of its streams (README "Metrics" and "Logs"): the body bytes each route
// moved (idemproxy_request_body_bytes_total, idemproxy_response_body_bytes_total; "-" when no route
// matched), the streams in progress (idemproxy_active_streams), the bodies cut short by the side
// that cut them (idemproxy_bodies_aborted_total{side,reason}), and an access-log line written at
// the exchange's end with the bytes and the duration. The real idemproxy in front of
// idem-stream-upstream (support/stream_upstream.cpp), its /metrics scraped on the admin listener.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ops/ops_support.hpp"
#include "support/eventually.hpp"
#include "support/process.hpp"
#include "support/proxy_fixture.hpp"
#include "support/stream_pattern.hpp"
#include "support/streaming_client.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using ops::admin_get;
using ops::metric_value;

constexpr std::uint64_t kMiB = 1024 * 1024;

// The e2e config with a key-less route in front of the streaming upstream (`files`: its paths end
// as the upstream's do), room for uploads, a 1 s upstream.timeout and the access log at info.
std::string stream_metrics_config() {
  std::string text(default_config_template());
  text.insert(text.find("limits:"), "  - name: files\n    match: { path: /files/* }\n    key: off\n");
  const std::string limits = "limits: { max_request_body: 8MiB }";
  text.replace(text.find(limits), limits.size(), "limits: { max_request_body: 64MiB }\nlog: { access: true }");
  return text;
}

class StreamMetrics : public ProxyTest {
 protected:
  static std::string upstream_binary() {
#ifdef IDEM_STREAM_UPSTREAM_BIN
    return IDEM_STREAM_UPSTREAM_BIN;
#else
    return "idem-stream-upstream";
#endif
  }

  ProxyOptions proxy_options() const override {
    ProxyOptions options;
    options.config_template = stream_metrics_config();
    options.variables["UPSTREAM_TIMEOUT"] = "1s";
    options.start_upstream = false;
    upstream_ = Process::start(ProcessSpec{.executable = upstream_binary(),
                                           .args = {"--listen", "127.0.0.1:0"},
                                           .env = {},
                                           .log_dir = upstream_logs_.path(),
                                           .name = "stream-upstream"});
    const auto line = upstream_->wait_for_stdout_line("listening 127.0.0.1:", 10s);
    if (!line) throw std::runtime_error("idem-stream-upstream did not start:\n" + upstream_->describe());
    options.upstream_port = static_cast<std::uint16_t>(std::stoul(line->substr(line->rfind(':') + 1)));
    return options;
  }

  std::string scrape() {
    if (admin_port_ == 0) admin_port_ = ops::admin_port_of(*proxy().proxy_process());
    const HttpResponse response = admin_get(admin_port_, "/metrics");
    EXPECT_EQ(response.status, 200) << describe(response);
    return response.body;
  }
  double value(const std::string& series) { return metric_value(scrape(), series).value_or(0); }
  // Waits (bounded) until `series` reads `expected`; its last value either way.
  double settles_at(const std::string& series, double expected) {
    double last = 0;
    eventually([&] { return (last = value(series)) == expected; }, time_bound(2s));
    return last;
  }

  StreamedResponse request(const std::string& head, ReadOptions options = {}) {
    StreamingConnection connection(proxy().proxy_port());
    if (!connection.send(head)) {
      StreamedResponse failed;
      failed.error = connection.error();
      return failed;
    }
    return connection.read_response(options);
  }
  StreamedResponse get(const std::string& target, ReadOptions options = {}) {
    return request("GET " + target + " HTTP/1.1\r\nHost: svc\r\n\r\n", options);
  }
  // A PUT of `size` pattern bytes; the upstream answers {"bytes":..,"sha256":..}.
  StreamedResponse upload(const std::string& target, std::uint64_t size, bool chunked) {
    StreamingConnection connection(proxy().proxy_port());
    const std::string head =
        "PUT " + target + " HTTP/1.1\r\nHost: svc\r\n" +
        (chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: " + std::to_string(size) + "\r\n") + "\r\n";
    if (!connection.send_pattern_body(head, size, chunked)) {
      StreamedResponse failed;
      failed.error = connection.error();
      return failed;
    }
    return connection.read_response(keeping_body());
  }

  // The access-log lines of `path` so far, waiting (bounded) until there are `count`.
  std::vector<boost::json::object> log_lines(const std::string& path, std::size_t count) {
    std::vector<boost::json::object> lines;
    eventually(
        [&] {
          lines.clear();
          for (auto& line : ops::events(proxy().proxy_process()->stderr_text(), "request")) {
            if (ops::string_field(line, "path") == path) lines.push_back(std::move(line));
          }
          return lines.size() >= count;
        },
        time_bound(2s));
    return lines;
  }

  mutable TempDir upstream_logs_{"idem-stream-upstream"};
  mutable std::optional<Process> upstream_;
  std::uint16_t admin_port_ = 0;
};

std::string bytes_series(const char* direction, const char* route) {
  return std::string("idemproxy_") + direction + "_body_bytes_total{route=\"" + route + "\"}";
}
std::string aborts_series(const char* side, const char* reason) {
  return std::string("idemproxy_bodies_aborted_total{side=\"") + side + "\",reason=\"" + reason + "\"}";
}

// The bytes of a download and an upload, each framed both ways, add up exactly per route: the
// `files` route's, and under "-" those of requests no route matches.
TEST_F(StreamMetrics, BodyBytesAddUpExactlyPerRoute) {
  const double files_in = value(bytes_series("request", "files"));
  const double files_out = value(bytes_series("response", "files"));
  const double none_in = value(bytes_series("request", "-"));
  const double none_out = value(bytes_series("response", "-"));

  const std::uint64_t download = 3 * kMiB + 17, chunked_download = 2 * kMiB + 5;
  const std::uint64_t upload_size = 5 * kMiB + 3, chunked_upload = 1 * kMiB + 9;
  const StreamedResponse got = get("/files/download?size=" + std::to_string(download));
  const StreamedResponse got_chunked = get("/download?chunked=1&size=" + std::to_string(chunked_download));
  const StreamedResponse put = upload("/files/upload", upload_size, false);
  const StreamedResponse put_chunked = upload("/upload", chunked_upload, true);
  for (const StreamedResponse* response : {&got, &got_chunked, &put, &put_chunked}) {
    ASSERT_TRUE(response->complete) << response->error;
    ASSERT_EQ(response->status, 200) << response->body;
  }
  ASSERT_EQ(got.body_bytes, download);
  ASSERT_EQ(got_chunked.body_bytes, chunked_download);
  ASSERT_NE(put.body.find("\"bytes\":" + std::to_string(upload_size)), std::string::npos) << put.body;
  ASSERT_NE(put_chunked.body.find("\"bytes\":" + std::to_string(chunked_upload)), std::string::npos)
      << put_chunked.body;

  // Body bytes only: no head, no chunk framing; the uploads' answers are small JSON bodies.
  EXPECT_EQ(settles_at(bytes_series("request", "files"), files_in + upload_size) - files_in, upload_size);
  EXPECT_EQ(settles_at(bytes_series("response", "files"), files_out + download + put.body.size()) - files_out,
            download + put.body.size());
  EXPECT_EQ(settles_at(bytes_series("request", "-"), none_in + chunked_upload) - none_in, chunked_upload);
  EXPECT_EQ(settles_at(bytes_series("response", "-"), none_out + chunked_download + put_chunked.body.size()) - none_out,
            chunked_download + put_chunked.body.size());
  const std::string text = scrape();
  EXPECT_EQ(ops::metric_type(text, "idemproxy_request_body_bytes_total"), "counter");
  EXPECT_EQ(ops::metric_type(text, "idemproxy_response_body_bytes_total"), "counter");
}

// A feed held open counts as one stream while it runs, and none once it ended.
TEST_F(StreamMetrics, ActiveStreamsCountAHeldFeedAndFallBackToZero) {
  EXPECT_EQ(settles_at("idemproxy_active_streams", 0), 0);
  std::optional<double> while_held;
  ReadOptions options;
  options.on_body = [&](std::string_view, auto) {
    // The first event is here; four more come 300 ms apart.
    if (!while_held) while_held = value("idemproxy_active_streams");
    return true;
  };
  const StreamedResponse feed = get("/files/sse?events=5&interval_ms=300", options);
  ASSERT_TRUE(feed.complete) << feed.error;
  ASSERT_TRUE(while_held.has_value());
  EXPECT_EQ(*while_held, 1) << "idemproxy_active_streams while a feed streamed";
  EXPECT_EQ(settles_at("idemproxy_active_streams", 0), 0) << "idemproxy_active_streams after the feed ended";
  EXPECT_EQ(ops::metric_type(scrape(), "idemproxy_active_streams"), "gauge");
}

// Each body cut short counts once, under the side that cut it: a client that stops reading a
// download or sending an upload; an upstream that dies mid-body (length and chunked) or goes
// silent past upstream.timeout. The access-log line says who, with the bytes that went through.
TEST_F(StreamMetrics, BodiesCutShortCountUnderTheSideThatCutThem) {
  const double client_failed = value(aborts_series("client", "failed"));
  const double upstream_failed = value(aborts_series("upstream", "failed"));
  const double upstream_timeout = value(aborts_series("upstream", "timeout"));
  const double client_timeout = value(aborts_series("client", "timeout"));

  // The client stops reading a long download.
  std::uint64_t read = 0;
  ReadOptions stop_reading;
  stop_reading.on_body = [&](std::string_view piece, auto) {
    read += piece.size();
    return read < 2 * kMiB;
  };
  ASSERT_EQ(get("/files/download?size=68719476736", stop_reading).error, "stopped by the test");
  EXPECT_EQ(settles_at(aborts_series("client", "failed"), client_failed + 1) - client_failed, 1);

  // The client closes mid-upload.
  {
    StreamingConnection connection(proxy().proxy_port());
    ASSERT_TRUE(connection.send("PUT /files/upload HTTP/1.1\r\nHost: svc\r\nContent-Length: 10485760\r\n\r\n" +
                                std::string(100'000, 'u')));
    std::this_thread::sleep_for(100ms);  // the bytes reach the proxy before the close
  }
  EXPECT_EQ(settles_at(aborts_series("client", "failed"), client_failed + 2) - client_failed, 2);

  // The upstream dies mid-body, 300,000 bytes in, with a length and chunked.
  for (const std::string framing : {"", "&chunked=1"}) {
    const StreamedResponse cut = get("/files/download?size=1048576&die_after=300000" + framing);
    EXPECT_EQ(cut.status, 200);
    EXPECT_FALSE(cut.complete);
  }
  EXPECT_EQ(settles_at(aborts_series("upstream", "failed"), upstream_failed + 2) - upstream_failed, 2);

  // The upstream goes silent past upstream.timeout (1 s) between two events.
  const StreamedResponse silent = get("/files/sse?events=2&interval_ms=1800");
  EXPECT_EQ(silent.status, 200);
  EXPECT_FALSE(silent.complete);
  EXPECT_EQ(settles_at(aborts_series("upstream", "timeout"), upstream_timeout + 1) - upstream_timeout, 1);

  EXPECT_EQ(value(aborts_series("client", "timeout")), client_timeout) << "no client went silent";
  EXPECT_EQ(value(aborts_series("client", "failed")) - client_failed, 2);
  EXPECT_EQ(value(aborts_series("upstream", "failed")) - upstream_failed, 2);

  // The access log: the two downloads the upstream cut carry the bytes that reached the client.
  const auto cut_lines = log_lines("/files/download", 3);
  ASSERT_EQ(cut_lines.size(), 3u);
  EXPECT_EQ(ops::string_field(cut_lines[0], "aborted_by"), "client");
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(ops::string_field(cut_lines[i], "aborted_by"), "upstream") << boost::json::serialize(cut_lines[i]);
    EXPECT_EQ(ops::int_field(cut_lines[i], "response_body_bytes"), 300000) << boost::json::serialize(cut_lines[i]);
  }
  const auto upload_lines = log_lines("/files/upload", 1);
  ASSERT_EQ(upload_lines.size(), 1u);
  EXPECT_EQ(ops::string_field(upload_lines[0], "aborted_by"), "client");
  EXPECT_EQ(ops::int_field(upload_lines[0], "request_body_bytes"), 100000) << boost::json::serialize(upload_lines[0]);
  EXPECT_EQ(ops::int_field(upload_lines[0], "status"), 0) << "no answer went out";
}

// The access-log line of a streamed download is written when the body has gone: it carries the
// body's bytes, and a duration at least as long as the upstream took to send it (and not much longer
// than the client waited). An upload's line carries its bytes in.
TEST_F(StreamMetrics, TheAccessLogLineCarriesTheBytesAndTheStreamsDuration) {
  // Eight writes of 64 KiB, 150 ms apart: at least 1.05 s of body.
  const std::uint64_t size = 8 * 64 * 1024;
  const auto paced = std::chrono::milliseconds(7 * 150);
  const auto sent = std::chrono::steady_clock::now();
  const StreamedResponse download = get("/files/download?size=" + std::to_string(size) + "&interval_ms=150");
  const auto waited = std::chrono::steady_clock::now() - sent;
  ASSERT_TRUE(download.complete) << download.error;
  ASSERT_EQ(download.body_bytes, size);
  const StreamedResponse put = upload("/files/upload", 777'777, true);
  ASSERT_TRUE(put.complete) << put.error;

  const auto downloads = log_lines("/files/download", 1);
  ASSERT_EQ(downloads.size(), 1u) << proxy().proxy_process()->stderr_text();
  const boost::json::object& line = downloads[0];
  const std::string text = boost::json::serialize(line);
  EXPECT_EQ(ops::string_field(line, "route"), "files") << text;
  EXPECT_EQ(ops::int_field(line, "status"), 200) << text;
  EXPECT_EQ(ops::int_field(line, "response_body_bytes"), static_cast<std::int64_t>(size)) << text;
  EXPECT_EQ(ops::int_field(line, "request_body_bytes"), 0) << text;
  EXPECT_EQ(ops::string_field(line, "aborted_by"), "") << text;
  const std::int64_t duration_us = ops::int_field(line, "duration_us").value_or(-1);
  EXPECT_GE(duration_us, std::chrono::duration_cast<std::chrono::microseconds>(paced).count())
      << "the line was written before the body had gone: " << text;
  // The proxy ends its clock after its last write completes, which the client can see before the
  // proxy's handler runs: the bound on the far side gets a margin.
  EXPECT_LE(duration_us, std::chrono::duration_cast<std::chrono::microseconds>(waited + std::chrono::milliseconds(500)).count())
      << text;

  const auto uploads = log_lines("/files/upload", 1);
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_EQ(ops::int_field(uploads[0], "request_body_bytes"), 777'777) << boost::json::serialize(uploads[0]);
  EXPECT_EQ(ops::int_field(uploads[0], "response_body_bytes"), static_cast<std::int64_t>(put.body.size()))
      << boost::json::serialize(uploads[0]);
}

}  // namespace
}  // namespace idem::test
