#pragma once
// A blocking HTTP/1.1 client for the streaming tests: bodies of any size go out generated
// (stream_pattern.hpp) and come back hashed as they arrive, never held whole; every piece of a
// body is handed to the test as it arrives, with its arrival time, and the test may stop reading
// (pause, or abort by closing) at any point. Responses are parsed by Beast; what the test needs
// to judge is kept: whether the message ended as its framing says, or was cut short.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "support/http_client.hpp"

namespace idem::test {

struct StreamedResponse {
  std::string error;  // empty: a response head was read (see `complete` for its body)
  int status = 0;
  HeaderMap headers;
  std::uint64_t body_bytes = 0;
  std::string body_sha256;   // of the body bytes received (hex)
  std::string body;          // the body, when ReadOptions::keep_body (small bodies only)
  bool complete = false;     // the body ended as its framing says (length, last chunk, or the close)
  bool peer_closed = false;  // the server closed the connection (after or during the body)
  bool reset = false;        // ... with a reset (ECONNRESET), not a FIN
  bool keep_alive = false;   // the response leaves the connection open

  // The first value of a header field; empty when absent.
  std::string header(std::string_view name) const {
    const auto found = headers.find(name);
    return found == headers.end() ? std::string() : found->second;
  }
  bool has_header(std::string_view name) const { return headers.find(name) != headers.end(); }
};

struct ReadOptions {
  std::chrono::milliseconds silence{15'000};  // longest wait for the next bytes
  bool head_request = false;                  // the response to a HEAD: no body
  bool keep_body = false;
  // Each piece of the body as it arrives; returning false stops reading there (the connection
  // is closed at once: an abort).
  std::function<bool(std::string_view piece, std::chrono::steady_clock::time_point arrived)> on_body;
};

// Options for a small body the test reads whole, and for a long body with patience.
inline ReadOptions keeping_body() {
  ReadOptions options;
  options.keep_body = true;
  return options;
}
inline ReadOptions with_silence(std::chrono::milliseconds silence) {
  ReadOptions options;
  options.silence = silence;
  return options;
}

class StreamingConnection {
 public:
  // Connects to 127.0.0.1:port; error() says why not.
  explicit StreamingConnection(std::uint16_t port);
  ~StreamingConnection();
  StreamingConnection(const StreamingConnection&) = delete;
  StreamingConnection& operator=(const StreamingConnection&) = delete;

  const std::string& error() const { return error_; }
  bool send(std::string_view bytes, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends `head` (ending with the blank line) and then `size` bytes of the pattern as its body,
  // chunked in 64 KiB chunks when `chunked` (the head must say so). Returns the SHA-256 (hex) of
  // the body sent, or nullopt when sending failed.
  std::optional<std::string> send_pattern_body(std::string_view head, std::uint64_t size, bool chunked,
                                               std::chrono::milliseconds timeout = std::chrono::seconds(120));
  // Reads one response (bytes past it stay for the next call).
  StreamedResponse read_response(const ReadOptions& options = {});
  // Closes the connection now (an abort when a response is still coming).
  void close();
  // Ends the sending side (a FIN): the request is all sent; the answer is still read.
  void shutdown_write();
  bool is_open() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::string error_;
  std::string pending_;  // bytes received past the last response
};

// SHA-256 (hex) of `size` bytes of the pattern (stream_pattern.hpp), computed without holding them.
std::string pattern_sha256(std::uint64_t size);

// The process's resident set, and its peak, in KiB (/proc/<pid>/status VmRSS, VmHWM); 0 when
// unreadable. reset_peak_rss() restarts the peak from the current RSS (/proc/<pid>/clear_refs).
std::uint64_t resident_kib(int pid);
std::uint64_t peak_resident_kib(int pid);
bool reset_peak_rss(int pid);

// How much the heavy tests shrink their bodies: 1 normally; IDEMPROXY_TEST_STREAM_SCALE under the
// sanitizers (tests/sanitizers.sh), where a GiB through instrumented code takes minutes.
std::uint64_t stream_scale();
// Whether memory bounds are checked: not under a sanitizer (its shadow memory and quarantine
// grow with traffic whatever the proxy holds).
bool memory_bounds_checked();
// A time bound as the plain stage checks it, widened fivefold under a sanitizer.
std::chrono::milliseconds time_bound(std::chrono::milliseconds plain);

}  // namespace idem::test
