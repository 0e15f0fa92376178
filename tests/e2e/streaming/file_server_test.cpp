// A real file server as the upstream: Debian's nginx, started by the test on a loopback port with
// its own prefix, serving a 1 GiB file (the pattern of support/stream_pattern.hpp) from the test's
// temporary directory. Through the proxy: the whole file, byte ranges (206, one and several), a
// HEAD, a conditional GET (304), all on one keep-alive connection.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "support/ports.hpp"
#include "support/process.hpp"
#include "support/proxy_fixture.hpp"
#include "support/stream_pattern.hpp"
#include "support/streaming_client.hpp"
#include "support/temp_dir.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
constexpr const char* kNginx = "/usr/sbin/nginx";

// nginx as one process (no master, no user switch), everything under `dir`.
std::string nginx_config(const std::filesystem::path& dir, std::uint16_t port) {
  const std::string d = dir.string();
  return "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log " + d + "/error.log;\npid " + d +
         "/nginx.pid;\nevents { worker_connections 64; }\nhttp {\n  access_log off;\n  client_body_temp_path " + d +
         "/tmp;\n  proxy_temp_path " + d + "/tmp;\n  fastcgi_temp_path " + d + "/tmp;\n  uwsgi_temp_path " + d +
         "/tmp;\n  scgi_temp_path " + d +
         "/tmp;\n  sendfile on;\n  default_type application/octet-stream;\n"
         "  server {\n    listen 127.0.0.1:" +
         std::to_string(port) + ";\n    root " + d + "/www;\n  }\n}\n";
}

std::string pattern_slice(std::uint64_t offset, std::uint64_t count) {
  std::string bytes;
  append_stream_pattern(bytes, offset, count);
  return bytes;
}

class FileServer : public ProxyTest {
 protected:
  ProxyOptions proxy_options() const override {
    if (!std::filesystem::exists(kNginx)) throw std::runtime_error("nginx is not installed (Debian's nginx-light)");
    std::filesystem::create_directories(dir_.path() / "www");
    std::filesystem::create_directories(dir_.path() / "tmp");
    {
      std::ofstream file(dir_.path() / "www" / "big.bin", std::ios::binary);
      std::string piece;
      for (std::uint64_t at = 0; at < size_;) {
        const std::uint64_t take = std::min<std::uint64_t>(1 << 20, size_ - at);
        piece.clear();
        append_stream_pattern(piece, at, take);
        file.write(piece.data(), static_cast<std::streamsize>(piece.size()));
        at += take;
      }
    }
    // A port found free may be taken before nginx binds it: a few tries.
    for (int attempt = 0; attempt < 3 && !nginx_; ++attempt) {
      const std::uint16_t port = free_port();
      std::ofstream(dir_.path() / "nginx.conf") << nginx_config(dir_.path(), port);
      Process started = Process::start(
          ProcessSpec{.executable = kNginx,
                      .args = {"-p", dir_.path().string() + "/", "-c", (dir_.path() / "nginx.conf").string(), "-e",
                               (dir_.path() / "error.log").string()},
                      .env = {},
                      .log_dir = dir_.path(),
                      .name = "nginx"});
      if (wait_for_port(port, 10s) && started.running()) {
        nginx_.emplace(std::move(started));
        nginx_port_ = port;
      }
    }
    if (!nginx_) throw std::runtime_error("nginx did not start: " + read_file(dir_.path() / "error.log"));
    ProxyOptions options;
    options.start_upstream = false;
    options.upstream_port = nginx_port_;
    return options;
  }

  std::uint64_t size_ = (1ULL << 30) / stream_scale();
  mutable TempDir dir_{"idem-nginx"};
  mutable std::optional<Process> nginx_;
  mutable std::uint16_t nginx_port_ = 0;
};

TEST_F(FileServer, NginxServesAGibibyteFileAndItsRangesThroughTheProxy) {
  StreamingConnection connection(proxy().proxy_port());
  const auto request = [&](const std::string& fields, const std::string& method = "GET") {
    EXPECT_TRUE(connection.send(method + " /big.bin HTTP/1.1\r\nHost: files\r\n" + fields + "\r\n"))
        << connection.error();
    ReadOptions options;
    options.silence = 30s;
    options.head_request = method == "HEAD";
    options.keep_body = false;
    return connection.read_response(options);
  };

  const StreamedResponse whole = request("");
  ASSERT_TRUE(whole.complete) << whole.error;
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.header("Content-Length"), std::to_string(size_));
  EXPECT_EQ(whole.body_bytes, size_);
  EXPECT_EQ(whole.body_sha256, pattern_sha256(size_));
  EXPECT_TRUE(whole.keep_alive);

  const auto ranged = [&](const std::string& range) {
    EXPECT_TRUE(connection.send("GET /big.bin HTTP/1.1\r\nHost: files\r\nRange: " + range + "\r\n\r\n"));
    return connection.read_response(keeping_body());
  };
  const StreamedResponse first = ranged("bytes=1000-1999");
  ASSERT_TRUE(first.complete) << first.error;
  EXPECT_EQ(first.status, 206);
  EXPECT_EQ(first.header("Content-Range"), "bytes 1000-1999/" + std::to_string(size_));
  EXPECT_EQ(first.body, pattern_slice(1000, 1000));

  const StreamedResponse suffix = ranged("bytes=-100");
  ASSERT_TRUE(suffix.complete) << suffix.error;
  EXPECT_EQ(suffix.status, 206);
  EXPECT_EQ(suffix.body, pattern_slice(size_ - 100, 100));

  const StreamedResponse tail = ranged("bytes=" + std::to_string(size_ - 70000) + "-");
  ASSERT_TRUE(tail.complete) << tail.error;
  EXPECT_EQ(tail.status, 206);
  EXPECT_EQ(tail.body, pattern_slice(size_ - 70000, 70000));

  const StreamedResponse several = ranged("bytes=0-9,500-509");
  ASSERT_TRUE(several.complete) << several.error;
  EXPECT_EQ(several.status, 206);
  EXPECT_EQ(several.header("Content-Type").rfind("multipart/byteranges", 0), 0u) << several.header("Content-Type");
  EXPECT_NE(several.body.find(pattern_slice(500, 10)), std::string::npos);

  const StreamedResponse head = request("", "HEAD");
  ASSERT_TRUE(head.complete) << head.error;
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("Content-Length"), std::to_string(size_));
  EXPECT_EQ(head.body_bytes, 0u);

  const StreamedResponse not_modified = request("If-None-Match: " + whole.header("ETag") + "\r\n");
  ASSERT_TRUE(not_modified.complete) << not_modified.error;
  EXPECT_EQ(not_modified.status, 304);
  EXPECT_EQ(not_modified.body_bytes, 0u);

  const StreamedResponse last = ranged("bytes=0-0");
  ASSERT_TRUE(last.complete) << last.error;
  EXPECT_EQ(last.status, 206);
  EXPECT_EQ(last.body, pattern_slice(0, 1));
}

}  // namespace
}  // namespace idem::test
