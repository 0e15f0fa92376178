// Bodies streamed both ways on every request no idempotency rule applies to (README "Streaming"):
// the real idemproxy in front of idem-stream-upstream (support/stream_upstream.cpp), which sends
// and takes bodies of any size without holding them, timestamps its events and tells how each of
// its streams ended. Each test asserts what a user of a download, an upload or a live feed relies
// on: every byte (SHA-256 on the far side), events as they are sent, memory that does not grow
// with the body (the proxy's VmHWM/VmRSS), an incomplete message when a side dies, the upstream
// connection closed when the client goes away.
//
// The GiB-sized cases run at full size in the plain stage; under the sanitizers
// (IDEMPROXY_TEST_STREAM_SCALE, tests/sanitizers.sh) their bodies shrink and memory is not
// judged. The binary runs serially (RUN_SERIAL): its timing and memory bounds are not shared
// with other tests' load.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.hpp"
#include "support/process.hpp"
#include "support/proxy_fixture.hpp"
#include "support/stream_pattern.hpp"
#include "support/streaming_client.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kGiB = 1024 * kMiB;

// The e2e config with room for large uploads and a short upstream timeout, which the feeds
// below outlive.
std::string streaming_config() {
  std::string text(default_config_template());
  // A guarded route (key required, the default max_stored_body of 1 MiB) in front of the same upstream.
  text.insert(text.find("limits:"), "  - name: guarded\n    match: { method: POST, path: /guarded/* }\n");
  const std::string limits = "limits: { max_request_body: 8MiB }";
  text.replace(text.find(limits), limits.size(), "limits: { max_request_body: ${MAX_REQUEST_BODY} }");
  return text;
}

std::uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
}

// The upstream's count of its response bodies.
struct StreamCounts {
  std::uint64_t started = 0, completed = 0, aborted = 0, open = 0, uploads = 0;
};

class Streaming : public ProxyTest {
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
    options.config_template = streaming_config();
    options.variables["UPSTREAM_TIMEOUT"] = upstream_timeout();
    options.variables["MAX_REQUEST_BODY"] = max_request_body();
    options.start_upstream = false;
    upstream_ = Process::start(ProcessSpec{.executable = upstream_binary(),
                                           .args = {"--listen", "127.0.0.1:0"},
                                           .env = {},
                                           .log_dir = upstream_logs_.path(),
                                           .name = "stream-upstream"});
    const auto line = upstream_->wait_for_stdout_line("listening 127.0.0.1:", 10s);
    if (!line) throw std::runtime_error("idem-stream-upstream did not start:\n" + upstream_->describe());
    upstream_port_ = static_cast<std::uint16_t>(std::stoul(line->substr(line->rfind(':') + 1)));
    options.upstream_port = upstream_port_;
    return options;
  }
  virtual std::string max_request_body() const { return "1GiB"; }
  virtual std::string upstream_timeout() const { return "1s"; }

  StreamCounts upstream_streams() const {
    StreamingConnection connection(upstream_port_);
    StreamCounts counts;
    if (!connection.send("GET /__streams HTTP/1.1\r\nHost: up\r\nConnection: close\r\n\r\n")) return counts;
    ReadOptions options;
    options.keep_body = true;
    const StreamedResponse response = connection.read_response(options);
    const auto value = boost::json::parse(response.body);
    const auto& object = value.as_object();
    counts.started = object.at("started").to_number<std::uint64_t>();
    counts.completed = object.at("completed").to_number<std::uint64_t>();
    counts.aborted = object.at("aborted").to_number<std::uint64_t>();
    counts.open = object.at("open").to_number<std::uint64_t>();
    counts.uploads = object.at("uploads").to_number<std::uint64_t>();
    return counts;
  }

  int proxy_pid() { return proxy().proxy_process()->pid(); }

  // One GET through the proxy on a fresh connection, its body hashed as it comes.
  StreamedResponse get(const std::string& target, ReadOptions options = {}) {
    StreamingConnection connection(proxy().proxy_port());
    if (!connection.send("GET " + target + " HTTP/1.1\r\nHost: svc\r\n\r\n")) {
      StreamedResponse failed;
      failed.error = connection.error();
      return failed;
    }
    return connection.read_response(options);
  }

  void expect_served_afterwards() {
    const StreamedResponse after = get("/download?size=1000", keeping_body());
    EXPECT_TRUE(after.complete) << after.error;
    EXPECT_EQ(after.status, 200);
    EXPECT_EQ(after.body_sha256, pattern_sha256(1000));
  }

  mutable TempDir upstream_logs_{"idem-stream-upstream"};
  mutable std::optional<Process> upstream_;
  mutable std::uint16_t upstream_port_ = 0;
};

// A body moved while the proxy's resident memory is watched: returns its peak growth in KiB over
// the resident size before (VmHWM restarted from VmRSS first).
template <class Move>
std::uint64_t peak_growth_kib(int pid, Move move) {
  reset_peak_rss(pid);
  const std::uint64_t before = resident_kib(pid);
  move();
  const std::uint64_t peak = peak_resident_kib(pid);
  return peak > before ? peak - before : 0;
}

// A body larger than the kernel can hold in socket buffers (loopback grows them to several MiB
// each way): a test of backpressure keeps at least this much under the sanitizers too, or the
// upstream finishes into the buffers while the client pauses.
std::uint64_t outsizing_socket_buffers(std::uint64_t full) { return std::max(full / stream_scale(), 64 * kMiB); }

TEST_F(Streaming, ServerSentEventsArriveAsTheyAreSent) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> events;  // (sent ns, arrived ns)
  std::string partial;
  ReadOptions options;
  options.on_body = [&](std::string_view piece, auto) {
    const std::uint64_t arrived = monotonic_ns();
    partial.append(piece);
    for (std::size_t end; (end = partial.find("\n\n")) != std::string::npos; partial.erase(0, end + 2)) {
      const std::string event = partial.substr(0, end);  // "data: <n> <sent ns>"
      events.emplace_back(std::stoull(event.substr(event.rfind(' ') + 1)), arrived);
    }
    return true;
  };
  const StreamedResponse response = get("/sse?events=6&interval_ms=300", options);
  ASSERT_TRUE(response.complete) << response.error;
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.header("Content-Type"), "text/event-stream");
  ASSERT_EQ(events.size(), 6u);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto lag = std::chrono::nanoseconds(events[i].second - events[i].first);
    EXPECT_LT(lag, time_bound(50ms)) << "event " << i + 1 << " arrived "
                                     << std::chrono::duration_cast<std::chrono::milliseconds>(lag).count()
                                     << " ms after its send";
  }
}

// upstream.timeout (1s here) bounds the wait for the head and each silence, not the feed.
TEST_F(Streaming, AFeedOutlivesTheUpstreamTimeoutWhileItKeepsSending) {
  std::size_t events = 0;
  ReadOptions options;
  options.on_body = [&](std::string_view piece, auto) {
    for (std::size_t at = 0; (at = piece.find("data: ", at)) != std::string_view::npos; at += 6) ++events;
    return true;
  };
  const auto started = std::chrono::steady_clock::now();
  const StreamedResponse response = get("/sse?events=8&interval_ms=400", options);
  ASSERT_TRUE(response.complete) << response.error;
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(events, 8u);
  EXPECT_GT(std::chrono::steady_clock::now() - started, 3s) << "the feed ran longer than upstream.timeout";

  // A silence longer than upstream.timeout ends it, short of its last chunk.
  const StreamedResponse silent = get("/sse?events=2&interval_ms=1800");
  EXPECT_EQ(silent.status, 200);
  EXPECT_FALSE(silent.complete) << "a feed silent past upstream.timeout was passed off as complete";
  EXPECT_TRUE(silent.peer_closed);
}

TEST_F(Streaming, AGibibyteDownloadArrivesWholeWithFlatProxyMemory) {
  const std::uint64_t size = kGiB / stream_scale();
  StreamedResponse response;
  const std::uint64_t growth = peak_growth_kib(
      proxy_pid(), [&] { response = get("/download?size=" + std::to_string(size), with_silence(30s)); });
  ASSERT_TRUE(response.complete) << response.error;
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.header("Content-Length"), std::to_string(size));
  EXPECT_EQ(response.body_bytes, size);
  EXPECT_EQ(response.body_sha256, pattern_sha256(size));
  if (memory_bounds_checked()) {
    EXPECT_LE(growth, 64 * 1024) << "peak RSS growth (KiB) while moving 1 GiB";
  }
  RecordProperty("peak_rss_growth_kib", std::to_string(growth));
  std::cout << "proxy peak RSS growth: " << growth << " KiB\n";
}

TEST_F(Streaming, AHalfGibibyteUploadReachesTheUpstreamWholeWithFlatProxyMemory) {
  const std::uint64_t size = 512 * kMiB / stream_scale();
  for (const bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "Content-Length");
    StreamingConnection connection(proxy().proxy_port());
    std::optional<std::string> sent;
    StreamedResponse response;
    const std::uint64_t growth = peak_growth_kib(proxy_pid(), [&] {
      const std::string head =
          std::string("PUT /upload HTTP/1.1\r\nHost: svc\r\nContent-Type: application/octet-stream\r\n") +
          (chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: " + std::to_string(size) + "\r\n") + "\r\n";
      sent = connection.send_pattern_body(head, size, chunked);
      response = connection.read_response(keeping_body());
    });
    ASSERT_TRUE(sent.has_value()) << connection.error();
    ASSERT_TRUE(response.complete) << response.error;
    ASSERT_EQ(response.status, 200) << response.body;
    const auto summary = boost::json::parse(response.body).as_object();
    EXPECT_EQ(summary.at("bytes").to_number<std::uint64_t>(), size);
    EXPECT_EQ(summary.at("sha256").as_string(), *sent) << "the upstream received other bytes than were sent";
    if (memory_bounds_checked()) {
      EXPECT_LE(growth, 64 * 1024) << "peak RSS growth (KiB) while moving 512 MiB";
    }
    std::cout << "proxy peak RSS growth: " << growth << " KiB\n";
  }
}

TEST_F(Streaming, SixteenConcurrentDownloadsKeepProxyMemoryFlat) {
  const std::uint64_t size = 100 * kMiB / stream_scale();
  const std::string expected = pattern_sha256(size);
  std::vector<StreamedResponse> responses(16);
  const std::uint64_t growth = peak_growth_kib(proxy_pid(), [&] {
    std::vector<std::thread> readers;
    for (auto& response : responses) {
      readers.emplace_back([&] { response = get("/download?size=" + std::to_string(size), with_silence(30s)); });
    }
    for (auto& reader : readers) reader.join();
  });
  for (const auto& response : responses) {
    ASSERT_TRUE(response.complete) << response.error;
    EXPECT_EQ(response.body_bytes, size);
    EXPECT_EQ(response.body_sha256, expected);
  }
  if (memory_bounds_checked()) {
    EXPECT_LE(growth, 96 * 1024) << "peak RSS growth (KiB) with 16 downloads at once";
  }
  RecordProperty("peak_rss_growth_kib", std::to_string(growth));
  std::cout << "proxy peak RSS growth: " << growth << " KiB\n";
}

// Backpressure: a client that stops reading holds the upstream back through TCP; nothing piles up
// in the proxy meanwhile.
TEST_F(Streaming, APausedReaderHoldsTheUpstreamBackWithoutMemoryGrowth) {
  const std::uint64_t size = outsizing_socket_buffers(512 * kMiB);
  StreamingConnection connection(proxy().proxy_port());
  ASSERT_TRUE(connection.send("GET /download?size=" + std::to_string(size) + " HTTP/1.1\r\nHost: svc\r\n\r\n"));
  const int pid = proxy_pid();
  std::uint64_t read = 0;
  std::uint64_t rss_at_pause = 0, rss_max_in_pause = 0;
  StreamCounts in_pause;
  ReadOptions options;
  options.silence = 30s;
  options.on_body = [&](std::string_view piece, auto) {
    const bool pause_now = read < 8 * kMiB / stream_scale() && read + piece.size() >= 8 * kMiB / stream_scale();
    read += piece.size();
    if (pause_now) {
      rss_at_pause = resident_kib(pid);
      for (int i = 0; i < 40; ++i) {  // 4 s
        std::this_thread::sleep_for(100ms);
        rss_max_in_pause = std::max(rss_max_in_pause, resident_kib(pid));
      }
      in_pause = upstream_streams();
    }
    return true;
  };
  const StreamedResponse response = connection.read_response(options);
  ASSERT_TRUE(response.complete) << response.error;
  EXPECT_EQ(response.body_sha256, pattern_sha256(size));
  EXPECT_EQ(in_pause.completed, 0u) << "the upstream finished its body while the client was not reading";
  if (memory_bounds_checked()) {
    EXPECT_LE(rss_max_in_pause, rss_at_pause + 4 * 1024) << "proxy RSS grew while the reader paused (KiB)";
  }
  std::cout << "proxy RSS at the pause " << rss_at_pause << " KiB, at most " << rss_max_in_pause << " KiB during it\n";
}

TEST_F(Streaming, AnUpstreamDyingMidBodyLeavesTheClientAnIncompleteMessage) {
  for (const std::string framing : {"", "&chunked=1"}) {
    SCOPED_TRACE(framing.empty() ? "Content-Length" : "chunked");
    const StreamedResponse response = get("/download?size=1048576&die_after=300000" + framing);
    EXPECT_TRUE(response.error.empty()) << response.error;
    EXPECT_EQ(response.status, 200);
    EXPECT_FALSE(response.complete) << "a body cut short reached the client as a complete message";
    EXPECT_TRUE(response.peer_closed) << "the client connection stayed open after the upstream died";
    EXPECT_LE(response.body_bytes, 300000u);
  }
  expect_served_afterwards();
}

// An HTTP/1.0 client cannot be sent chunks: it reads a chunked answer ended by the close. Cut
// by the upstream, that answer must not end with the FIN that would mark it complete.
TEST_F(Streaming, ACutBodyEndedByTheCloseReachesAnHttp10ClientAsAReset) {
  StreamingConnection connection(proxy().proxy_port());
  ASSERT_TRUE(connection.send("GET /download?size=1048576&chunked=1&die_after=300000 HTTP/1.0\r\nHost: svc\r\n\r\n"));
  const StreamedResponse response = connection.read_response();
  EXPECT_EQ(response.status, 200);
  EXPECT_FALSE(response.complete) << "a body cut short reached an HTTP/1.0 client as a complete message";
  EXPECT_TRUE(response.reset);
  EXPECT_LE(response.body_bytes, 300000u);
  expect_served_afterwards();
}

// Beast takes a chunk's size line (its extensions) and the trailers whole: a client sending one
// that never ends must be refused, not buffered, whether the body streams or is read whole.
TEST_F(Streaming, AChunkSizeLineThatNeverEndsIsRefusedWithoutMemoryGrowth) {
  const std::uint64_t junk = 64 * kMiB / stream_scale();
  for (const std::string& head :
       {std::string("POST /upload HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n1;ext="),
        std::string("POST /guarded/junk HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: k-junk\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n1;ext=")}) {
    SCOPED_TRACE(head.substr(0, head.find(' ', 5)));
    StreamedResponse response;
    const std::uint64_t growth = peak_growth_kib(proxy_pid(), [&] {
      StreamingConnection connection(proxy().proxy_port());
      ASSERT_TRUE(connection.send(head));
      const std::string piece(kMiB, 'a');
      for (std::uint64_t sent = 0; sent < junk && connection.send(piece, 5s); sent += piece.size()) {
      }
      response = connection.read_response(keeping_body());
    });
    EXPECT_EQ(response.status, 400) << response.error;
    if (stream_scale() == 1) {
      EXPECT_LE(growth, 8 * 1024u) << "proxy RSS grew with the chunk size line (KiB)";
    }
  }
  expect_served_afterwards();
}

// upstream.timeout (1 s here) bounds the whole wait for the head, however it trickles in.
TEST_F(Streaming, AHeadTricklingInPastTheUpstreamTimeoutIs504) {
  const auto started = std::chrono::steady_clock::now();
  const StreamedResponse slow = get("/slow-head?interval_ms=200", keeping_body());  // 38 bytes: 7 s
  EXPECT_EQ(slow.status, 504) << slow.error;
  EXPECT_LT(std::chrono::steady_clock::now() - started, time_bound(3s));
  expect_served_afterwards();
}

// A guarded answer is its request's only delivery: a client that half-closes once its request is
// sent (shutdown(SHUT_WR), as `nc -N` does) still reads all of it.
TEST_F(Streaming, AClientThatHalfClosesGetsAllOfItsGuardedAnswer) {
  // Past the route's max_stored_body (1 MiB) under the sanitizers too: the rest streams.
  const std::uint64_t size = std::max(8 * kMiB / stream_scale(), 2 * kMiB);
  StreamingConnection connection(proxy().proxy_port());
  ASSERT_TRUE(connection.send("POST /guarded/download?interval_ms=5&size=" + std::to_string(size) +
                              " HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: " + unique_key("half-close") +
                              "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"));
  connection.shutdown_write();
  const StreamedResponse response = connection.read_response(with_silence(30s));
  ASSERT_TRUE(response.complete) << response.error;
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body_sha256, pattern_sha256(size));
}

class StreamingPatientUpstream : public Streaming {
 protected:
  std::string upstream_timeout() const override { return "5s"; }
};

TEST_F(StreamingPatientUpstream, AClientAbortClosesTheUpstreamConnectionWithinASecond) {
  // A download the client stops reading, and a feed between two events 3 s apart (nothing is
  // written when the client goes: only watching the client tells).
  struct Case {
    std::string target;
    std::uint64_t read_before_abort;
  };
  for (const Case& abort :
       {Case{"/download?size=68719476736", 4 * kMiB}, Case{"/sse?events=100&interval_ms=3000", 1}}) {
    SCOPED_TRACE(abort.target);
    const StreamCounts before = upstream_streams();
    StreamingConnection connection(proxy().proxy_port());
    ASSERT_TRUE(connection.send("GET " + abort.target + " HTTP/1.1\r\nHost: svc\r\n\r\n"));
    std::uint64_t read = 0;
    ReadOptions options;
    options.on_body = [&](std::string_view piece, auto) {
      read += piece.size();
      return read < abort.read_before_abort;
    };
    const StreamedResponse response = connection.read_response(options);
    ASSERT_EQ(response.error, "stopped by the test");
    const auto aborted_at = std::chrono::steady_clock::now();
    EXPECT_TRUE(eventually([&] { return upstream_streams().aborted == before.aborted + 1; }, time_bound(1s)))
        << "the upstream's connection outlived the client's by more than a second";
    EXPECT_LT(std::chrono::steady_clock::now() - aborted_at, time_bound(1500ms));
  }
  expect_served_afterwards();
}

TEST_F(Streaming, KeepAliveAndPipeliningRightAfterAStreamedResponse) {
  StreamingConnection connection(proxy().proxy_port());
  ASSERT_TRUE(connection.send("GET /download?size=3000000&chunked=1 HTTP/1.1\r\nHost: svc\r\n\r\n"));
  const StreamedResponse first = connection.read_response();
  ASSERT_TRUE(first.complete) << first.error;
  EXPECT_EQ(first.header("Transfer-Encoding"), "chunked");
  EXPECT_EQ(first.body_sha256, pattern_sha256(3000000));
  EXPECT_TRUE(first.keep_alive);
  // Three requests in one write, on the same connection: a streamed upload, a download, a plain route.
  const std::string upload_body(5000, 'u');
  ASSERT_TRUE(connection.send("PUT /upload HTTP/1.1\r\nHost: svc\r\nContent-Length: 5000\r\n\r\n" + upload_body +
                              "GET /download?size=70000 HTTP/1.1\r\nHost: svc\r\n\r\n"
                              "GET /plain/x HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n"));
  const StreamedResponse upload = connection.read_response(keeping_body());
  ASSERT_TRUE(upload.complete) << upload.error;
  EXPECT_NE(upload.body.find("\"bytes\":5000"), std::string::npos) << upload.body;
  const StreamedResponse download = connection.read_response();
  ASSERT_TRUE(download.complete) << download.error;
  EXPECT_EQ(download.body_sha256, pattern_sha256(70000));
  const StreamedResponse plain = connection.read_response(keeping_body());
  ASSERT_TRUE(plain.complete) << plain.error;
  EXPECT_EQ(plain.status, 200);
  EXPECT_EQ(plain.body, "ok");
}

// A transfer coding the proxy does not apply itself is passed on named, never stripped; an
// HTTP/1.0 client, which cannot receive one, gets a 502 instead of coded bytes read as plain.
TEST_F(Streaming, OtherTransferCodingsAreForwardedNamed) {
  const StreamedResponse chunked = get("/download?size=5000&chunked=1&coding=gzip");
  ASSERT_TRUE(chunked.complete) << chunked.error;
  EXPECT_EQ(chunked.header("Transfer-Encoding"), "gzip, chunked");
  EXPECT_EQ(chunked.body_sha256, pattern_sha256(5000));

  const StreamedResponse close_delimited = get("/download?size=5000&close=1&coding=gzip");
  ASSERT_TRUE(close_delimited.complete) << close_delimited.error;
  EXPECT_EQ(close_delimited.header("Transfer-Encoding"), "gzip");
  EXPECT_FALSE(close_delimited.has_header("Content-Length"));
  EXPECT_TRUE(close_delimited.peer_closed) << "a body ended by the close must end the client's connection too";
  EXPECT_EQ(close_delimited.body_sha256, pattern_sha256(5000));

  StreamingConnection old_client(proxy().proxy_port());
  ASSERT_TRUE(old_client.send("GET /download?size=5000&chunked=1&coding=gzip HTTP/1.0\r\nHost: svc\r\n\r\n"));
  const StreamedResponse refused = old_client.read_response(keeping_body());
  EXPECT_EQ(refused.status, 502) << refused.body;
  EXPECT_NE(refused.body.find("gzip"), std::string::npos) << refused.body;

  // A guarded route never stores such a body (it could only replay it without its coding): the
  // first client gets it named, the record says too large to replay.
  const std::string key = unique_key("coded");
  const std::string post =
      "POST /guarded/download?size=5000&chunked=1&coding=gzip HTTP/1.1\r\nHost: svc\r\n"
      "Idempotency-Key: " +
      key + "\r\nContent-Length: 2\r\n\r\n{}";
  StreamingConnection guarded(proxy().proxy_port());
  ASSERT_TRUE(guarded.send(post));
  const StreamedResponse coded = guarded.read_response();
  ASSERT_TRUE(coded.complete) << coded.error;
  EXPECT_EQ(coded.header("Transfer-Encoding"), "gzip, chunked");
  EXPECT_EQ(coded.body_sha256, pattern_sha256(5000));
  ASSERT_TRUE(guarded.send(post));
  const StreamedResponse retried = guarded.read_response(keeping_body());
  EXPECT_EQ(retried.status, 409) << retried.body;
  EXPECT_NE(retried.body.find("response-too-large-to-replay"), std::string::npos) << retried.body;
}

class StreamingSmallLimit : public Streaming {
 protected:
  std::string max_request_body() const override { return "1MiB"; }
};

// The request body limit on a streamed body: a length above it is refused before a byte is read;
// a chunked body is counted, and the connection closed once it passes the limit.
TEST_F(StreamingSmallLimit, TheRequestBodyLimitHoldsOnStreamedBodies) {
  StreamingConnection by_length(proxy().proxy_port());
  ASSERT_TRUE(by_length.send("PUT /upload HTTP/1.1\r\nHost: svc\r\nContent-Length: 2097152\r\n\r\n"));
  const StreamedResponse refused = by_length.read_response(keeping_body());
  EXPECT_EQ(refused.status, 413) << refused.body;

  const StreamCounts before = upstream_streams();
  StreamingConnection chunked(proxy().proxy_port());
  const auto sent = chunked.send_pattern_body("PUT /upload HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n",
                                              2 * kMiB, true, 10s);
  const StreamedResponse cut = chunked.read_response(keeping_body());
  EXPECT_EQ(cut.status, 413) << cut.body;
  EXPECT_TRUE(cut.peer_closed || !cut.keep_alive);
  // The upstream never got a complete body.
  EXPECT_EQ(upstream_streams().uploads, before.uploads);
  (void)sent;
}

// A guarded answer past the route's max_stored_body: the record is settled at once as too large
// to replay (with its status), and the rest streams to the first client. It costs no memory and
// no lease time, and its outcome is never unknown, even when the upstream dies mid-body.
TEST_F(Streaming, AGuardedAnswerPastMaxStoredBodyStreamsToItsFirstClientAndRetriesGet409) {
  const std::uint64_t size = outsizing_socket_buffers(200 * kMiB);
  const std::string key = unique_key("guarded-large");
  const auto post = [&](const std::string& target, const std::string& with_key) {
    return "POST " + target + " HTTP/1.1\r\nHost: svc\r\nIdempotency-Key: " + with_key +
           "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
  };
  const std::string target = "/guarded/download?size=" + std::to_string(size);
  StreamedResponse first;
  StreamCounts while_streaming;
  std::string retry_while_streaming;
  const std::uint64_t growth = peak_growth_kib(proxy_pid(), [&] {
    StreamingConnection connection(proxy().proxy_port());
    ASSERT_TRUE(connection.send(post(target, key)));
    std::uint64_t read = 0;
    ReadOptions options = with_silence(30s);
    options.on_body = [&](std::string_view piece, auto) {
      // With the first client still reading, a retry already meets the settled record.
      if (read < 4 * kMiB / stream_scale() && read + piece.size() >= 4 * kMiB / stream_scale()) {
        StreamingConnection retry(proxy().proxy_port());
        if (retry.send(post(target, key))) retry_while_streaming = retry.read_response(keeping_body()).body;
        while_streaming = upstream_streams();
      }
      read += piece.size();
      return true;
    };
    first = connection.read_response(options);
  });
  ASSERT_TRUE(first.complete) << first.error;
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body_bytes, size);
  EXPECT_EQ(first.body_sha256, pattern_sha256(size));
  EXPECT_NE(retry_while_streaming.find("response-too-large-to-replay"), std::string::npos)
      << "a retry during the first answer's body: " << retry_while_streaming;
  EXPECT_EQ(while_streaming.completed, 0u) << "the retry was answered only once the body had gone";
  if (memory_bounds_checked()) {
    EXPECT_LE(growth, 64 * 1024) << "peak RSS growth (KiB) while a guarded route streamed its answer";
  }
  std::cout << "proxy peak RSS growth: " << growth << " KiB\n";

  StreamingConnection retry(proxy().proxy_port());
  ASSERT_TRUE(retry.send(post(target, key)));
  const StreamedResponse replayed = retry.read_response(keeping_body());
  EXPECT_EQ(replayed.status, 409) << replayed.body;
  EXPECT_NE(replayed.body.find("response-too-large-to-replay"), std::string::npos) << replayed.body;
  EXPECT_NE(replayed.body.find("200"), std::string::npos) << "the 409 names the original status: " << replayed.body;
  EXPECT_EQ(upstream_streams().started, 1u) << "the upstream ran the request once";

  // The upstream dying past max_stored_body: the record already says too large, never unknown.
  const std::string cut_key = unique_key("guarded-cut");
  const std::string cut_target =
      "/guarded/download?size=" + std::to_string(8 * kMiB) + "&die_after=" + std::to_string(3 * kMiB);
  StreamingConnection cut(proxy().proxy_port());
  ASSERT_TRUE(cut.send(post(cut_target, cut_key)));
  const StreamedResponse incomplete = cut.read_response();
  EXPECT_EQ(incomplete.status, 200);
  EXPECT_FALSE(incomplete.complete) << "a body cut short reached the client as complete";
  StreamingConnection after_cut(proxy().proxy_port());
  ASSERT_TRUE(after_cut.send(post(cut_target, cut_key)));
  const StreamedResponse settled = after_cut.read_response(keeping_body());
  EXPECT_EQ(settled.status, 409) << settled.body;
  EXPECT_NE(settled.body.find("response-too-large-to-replay"), std::string::npos) << settled.body;
}

}  // namespace
}  // namespace idem::test
