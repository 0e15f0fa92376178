#include "support/streaming_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "support/sha256.hpp"
#include "support/stream_pattern.hpp"

namespace idem::test {
namespace {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kPiece = 64 * 1024;

// Waits until `fd` is ready for `events` or `timeout` passes.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd entry{fd, events, 0};
  const int ready = ::poll(&entry, 1, static_cast<int>(timeout.count()));
  return ready > 0;
}

std::uint64_t status_field_kib(int pid, std::string_view field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::strtoull(line.c_str() + field.size(), nullptr, 10);
  }
  return 0;
}

}  // namespace

StreamingConnection::StreamingConnection(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error_ = "socket failed";
    return;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    error_ = "connect failed";
    close();
    return;
  }
  const int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

StreamingConnection::~StreamingConnection() { close(); }

void StreamingConnection::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void StreamingConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool StreamingConnection::send(std::string_view bytes, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!bytes.empty()) {
    if (fd_ < 0) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || !wait_for(fd_, POLLOUT, left)) {
      error_ = "send timed out";
      return false;
    }
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      error_ = "send failed";
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::optional<std::string> StreamingConnection::send_pattern_body(std::string_view head, std::uint64_t size,
                                                                  bool chunked, std::chrono::milliseconds timeout) {
  if (!send(head, timeout)) return std::nullopt;
  Sha256 sha;
  std::string piece;
  for (std::uint64_t sent = 0; sent < size;) {
    const std::uint64_t take = std::min<std::uint64_t>(kPiece, size - sent);
    piece.clear();
    append_stream_pattern(piece, sent, take);
    sha.update(piece.data(), piece.size());
    if (chunked) {
      char size_line[32];
      const int length = std::snprintf(size_line, sizeof size_line, "%llx\r\n", static_cast<unsigned long long>(take));
      piece.insert(0, size_line, static_cast<std::size_t>(length));
      piece += "\r\n";
    }
    if (!send(piece, timeout)) return std::nullopt;
    sent += take;
  }
  if (chunked && !send("0\r\n\r\n", timeout)) return std::nullopt;
  return sha.hex();
}

StreamedResponse StreamingConnection::read_response(const ReadOptions& options) {
  StreamedResponse response;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  parser.header_limit(64 * 1024);
  if (options.head_request) parser.skip(true);
  parser.eager(true);
  Sha256 sha;
  auto window = std::make_unique<char[]>(kPiece);
  std::string input = std::move(pending_);
  pending_.clear();
  char buffer[kPiece];
  bool header_taken = false;
  for (;;) {
    // Parse what is buffered.
    while (!input.empty() && !parser.is_done()) {
      parser.get().body().data = window.get();
      parser.get().body().size = kPiece;
      boost::system::error_code ec;
      const std::size_t used = parser.put(boost::asio::buffer(input), ec);
      input.erase(0, used);
      const std::size_t got = kPiece - parser.get().body().size;
      if (got > 0) {
        const std::string_view piece(window.get(), got);
        sha.update(piece.data(), piece.size());
        response.body_bytes += got;
        if (options.keep_body) response.body.append(piece);
        if (options.on_body && !options.on_body(piece, Clock::now())) {
          close();
          response.error = "stopped by the test";
          return response;
        }
      }
      if (ec == http::error::need_more) break;
      if (ec && ec != http::error::need_buffer) {
        response.error = "parse error: " + ec.message();
        return response;
      }
      if (used == 0 && got == 0) break;
    }
    if (parser.is_header_done() && !header_taken) {
      header_taken = true;
      response.status = static_cast<int>(parser.get().result_int());
      for (const auto& field : parser.get()) {
        response.headers.emplace(std::string(field.name_string()), std::string(field.value()));
      }
    }
    if (parser.is_done()) {
      response.complete = true;
      response.keep_alive = parser.get().keep_alive();
      response.body_sha256 = sha.hex();
      pending_ = std::move(input);
      return response;
    }
    if (fd_ < 0) {
      response.error = "connection closed";
      break;
    }
    if (!wait_for(fd_, POLLIN, options.silence)) {
      response.error = "timed out waiting for the next bytes";
      break;
    }
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      response.peer_closed = true;
      // Only an orderly close (a FIN) can end a body delimited by the close; a reset cuts it.
      response.reset = n < 0;
      boost::system::error_code ec;
      if (!response.reset) parser.put_eof(ec);
      if (!header_taken) {
        response.error = "closed before a response head";
      } else if (!response.reset && !ec && parser.is_done()) {
        response.complete = true;
      }
      break;
    }
    input.append(buffer, static_cast<std::size_t>(n));
  }
  response.body_sha256 = sha.hex();
  return response;
}

std::string pattern_sha256(std::uint64_t size) {
  Sha256 sha;
  std::string piece;
  for (std::uint64_t at = 0; at < size;) {
    const std::uint64_t take = std::min<std::uint64_t>(kPiece, size - at);
    piece.clear();
    append_stream_pattern(piece, at, take);
    sha.update(piece.data(), piece.size());
    at += take;
  }
  return sha.hex();
}

std::uint64_t resident_kib(int pid) { return status_field_kib(pid, "VmRSS:"); }
std::uint64_t peak_resident_kib(int pid) { return status_field_kib(pid, "VmHWM:"); }

bool reset_peak_rss(int pid) {
  std::ofstream clear("/proc/" + std::to_string(pid) + "/clear_refs");
  clear << "5";
  return static_cast<bool>(clear.flush());
}

std::uint64_t stream_scale() {
  const char* value = std::getenv("IDEMPROXY_TEST_STREAM_SCALE");
  if (value == nullptr) return 1;
  const std::uint64_t scale = std::strtoull(value, nullptr, 10);
  return scale == 0 ? 1 : scale;
}

bool memory_bounds_checked() { return stream_scale() == 1; }

std::chrono::milliseconds time_bound(std::chrono::milliseconds plain) {
  return stream_scale() == 1 ? plain : plain * 5;
}

}  // namespace idem::test
