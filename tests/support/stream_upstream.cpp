// idem-stream-upstream: the upstream the streaming tests put behind idemproxy. It sends and
// receives bodies of any size without holding them (a generated pattern out, a running SHA-256
// in), writes each piece as its own write so its timing is seen, and can die mid-body:
//   GET  /download?size=N            N bytes of stream_pattern(), Content-Length, in 64 KiB writes
//        &chunked=1                  Transfer-Encoding: chunked, one chunk per write
//        &close=1                    no length: the body ends with the close
//        &coding=gzip                name this coding before chunked (or alone, with close=1)
//        &die_after=K                close the connection after K body bytes (no last chunk)
//        &interval_ms=M              wait M ms between two writes
//   GET  /sse?events=N&interval_ms=M text/event-stream, chunked: one event per chunk, written and
//                                    flushed every M ms: "data: <n> <CLOCK_MONOTONIC ns at the write>\n\n"
//   GET  /slow-head?interval_ms=M    "200 ok" written a byte at a time, M ms apart
//   PUT|POST /upload                 reads the body as it comes (length or chunked) and answers
//                                    {"bytes": n, "sha256": "<hex>"}
//   GET  /__streams                  {"started": n, "completed": n, "aborted": n, "open": n,
//                                    "uploads": n}: response bodies begun, written to their end,
//                                    cut by the client (a write failed, or it closed while one was
//                                    pending), connections open now, upload bodies received whole
// Anything else: 200 "ok". Paths are matched by their last segment (/guarded/download is a
// download). Keep-alive as HTTP/1.1 says. One io thread.
//
// Usage: idem-stream-upstream --listen 127.0.0.1:PORT (0 = ephemeral). Prints "listening
// 127.0.0.1:<port>" once bound; SIGTERM/SIGINT exit 0.

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "support/sha256.hpp"
#include "support/stream_pattern.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace net::experimental::awaitable_operators;
using idem::test::Sha256;
constexpr auto use_tuple = net::as_tuple(net::use_awaitable);
constexpr std::size_t kWriteSize = 64 * 1024;

struct Counters {
  std::uint64_t started = 0, completed = 0, aborted = 0, open = 0, uploads = 0;
};

std::optional<std::uint64_t> query_number(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto equals = item.find('=');
    if (item.substr(0, equals) != name || equals == std::string_view::npos) continue;
    std::uint64_t value = 0;
    const std::string_view digits = item.substr(equals + 1);
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec == std::errc{} && ptr == digits.data() + digits.size()) return value;
  }
  return std::nullopt;
}

std::optional<std::string> query_text(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto equals = item.find('=');
    if (item.substr(0, equals) == name && equals != std::string_view::npos) return std::string(item.substr(equals + 1));
  }
  return std::nullopt;
}

std::string hex(std::size_t value) {
  char digits[20];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value, 16);
  return std::string(digits, end);
}

std::uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Counters& counters) : socket_(std::move(socket)), counters_(counters) {
    ++counters_.open;
  }
  ~Session() { --counters_.open; }

  net::awaitable<void> run() {
    auto self = shared_from_this();
    for (;;) {
      http::request_parser<http::buffer_body> parser;
      parser.body_limit(boost::none);
      auto [ec, n] = co_await http::async_read_header(socket_, buffer_, parser, use_tuple);
      if (ec) co_return;
      const auto& request = parser.get();
      const std::string target(request.target());
      const auto question = target.find('?');
      const std::string path = target.substr(0, question);
      const std::string query = question == std::string::npos ? "" : target.substr(question + 1);
      keep_alive_ = request.keep_alive();
      bool ok = false;
      // Matched by the last segment: a test's route may put a prefix before it.
      if (path.ends_with("/upload")) {
        ok = co_await upload(parser);
      } else {
        if (!co_await discard_body(parser)) co_return;
        if (path.ends_with("/download")) {
          ok = co_await download(query);
        } else if (path.ends_with("/sse")) {
          ok = co_await sse(query);
        } else if (path.ends_with("/slow-head")) {
          ok = co_await slow_head(query);
        } else if (path == "/__streams") {
          ok = co_await respond("{\"started\":" + std::to_string(counters_.started) +
                                ",\"completed\":" + std::to_string(counters_.completed) + ",\"aborted\":" +
                                std::to_string(counters_.aborted) + ",\"open\":" + std::to_string(counters_.open) +
                                ",\"uploads\":" + std::to_string(counters_.uploads) + "}");
        } else {
          ok = co_await respond("ok");
        }
      }
      if (!ok || !keep_alive_) break;
    }
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
  }

 private:
  net::awaitable<bool> discard_body(http::request_parser<http::buffer_body>& parser) {
    char sink[16 * 1024];
    while (!parser.is_done()) {
      parser.get().body().data = sink;
      parser.get().body().size = sizeof sink;
      auto [ec, n] = co_await http::async_read(socket_, buffer_, parser, use_tuple);
      if (ec && ec != http::error::need_buffer) co_return false;
    }
    co_return true;
  }

  net::awaitable<bool> upload(http::request_parser<http::buffer_body>& parser) {
    Sha256 sha;
    std::uint64_t bytes = 0;
    auto window = std::make_unique<char[]>(kWriteSize);
    while (!parser.is_done()) {
      parser.get().body().data = window.get();
      parser.get().body().size = kWriteSize;
      auto [ec, n] = co_await http::async_read(socket_, buffer_, parser, use_tuple);
      if (ec && ec != http::error::need_buffer) co_return false;
      const std::size_t got = kWriteSize - parser.get().body().size;
      sha.update(window.get(), got);
      bytes += got;
    }
    ++counters_.uploads;
    co_return co_await respond("{\"bytes\":" + std::to_string(bytes) + ",\"sha256\":\"" + sha.hex() + "\"}");
  }

  // An answer that trickles: each byte alone, `interval_ms` apart.
  net::awaitable<bool> slow_head(std::string_view query) {
    const auto interval = std::chrono::milliseconds(query_number(query, "interval_ms").value_or(100));
    response_ = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    net::steady_timer timer(socket_.get_executor());
    for (std::size_t at = 0; at < response_.size(); ++at) {
      if (at > 0) {
        timer.expires_after(interval);
        co_await timer.async_wait(use_tuple);
      }
      auto [ec, n] = co_await net::async_write(socket_, net::buffer(response_.data() + at, 1), use_tuple);
      if (ec) co_return false;
    }
    co_return true;
  }

  net::awaitable<bool> respond(std::string body) {
    response_ = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                "\r\n" + (keep_alive_ ? "" : "Connection: close\r\n") + "\r\n" + body;
    auto [ec, n] = co_await net::async_write(socket_, net::buffer(response_), use_tuple);
    co_return !ec;
  }

  // Sends the body while watching the connection: the client closing it (or resetting it) ends
  // the body as aborted even while no write is pending.
  net::awaitable<bool> body_watched(net::awaitable<bool> body) {
    ++counters_.started;
    auto result = co_await (std::move(body) || watch_close());
    if (result.index() == 0 && std::get<0>(result)) {
      ++counters_.completed;
      co_return true;
    }
    ++counters_.aborted;
    co_return false;
  }

  net::awaitable<void> watch_close() {
    char byte;
    // The request was read whole: anything readable now is the close (or a pipelined request,
    // which these tests never send during a streamed body).
    co_await socket_.async_wait(tcp::socket::wait_read, use_tuple);
    const auto n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) co_await net::steady_timer(socket_.get_executor(), std::chrono::hours(1)).async_wait(use_tuple);
  }

  net::awaitable<bool> write(std::string_view bytes) {
    auto [ec, n] = co_await net::async_write(socket_, net::buffer(bytes.data(), bytes.size()), use_tuple);
    co_return !ec;
  }

  net::awaitable<bool> pause(std::uint64_t ms) {
    if (ms == 0) co_return true;
    net::steady_timer timer(socket_.get_executor(), std::chrono::milliseconds(ms));
    co_await timer.async_wait(use_tuple);
    co_return true;
  }

  net::awaitable<bool> download(std::string query) {
    const std::uint64_t size = query_number(query, "size").value_or(0);
    const bool chunked = query_number(query, "chunked").value_or(0) == 1;
    const bool close = query_number(query, "close").value_or(0) == 1;
    const std::optional<std::string> coding = query_text(query, "coding");
    const std::optional<std::uint64_t> die_after = query_number(query, "die_after");
    const std::uint64_t interval_ms = query_number(query, "interval_ms").value_or(0);
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n";
    if (chunked) {
      head += "Transfer-Encoding: " + (coding ? *coding + ", " : std::string()) + "chunked\r\n";
    } else if (close) {
      if (coding) head += "Transfer-Encoding: " + *coding + "\r\n";
      keep_alive_ = false;
    } else {
      head += "Content-Length: " + std::to_string(size) + "\r\n";
    }
    if (!keep_alive_) head += "Connection: close\r\n";
    head += "\r\n";
    if (!co_await write(head)) co_return false;
    co_return co_await body_watched(download_body(size, chunked, die_after, interval_ms));
  }

  net::awaitable<bool> download_body(std::uint64_t size, bool chunked, std::optional<std::uint64_t> die_after,
                                     std::uint64_t interval_ms) {
    std::string piece;
    for (std::uint64_t sent = 0; sent < size;) {
      std::uint64_t take = std::min<std::uint64_t>(kWriteSize, size - sent);
      if (die_after && sent + take > *die_after) take = *die_after - sent;
      piece.clear();
      if (chunked && take > 0) piece += hex(take) + "\r\n";
      idem::test::append_stream_pattern(piece, sent, take);
      if (chunked && take > 0) piece += "\r\n";
      if (!co_await write(piece)) co_return false;
      sent += take;
      if (die_after && sent >= *die_after) {
        // Dies mid-body: the connection ends, no last chunk, short of the length.
        keep_alive_ = false;
        beast::error_code ignored;
        socket_.close(ignored);
        co_return true;
      }
      co_await pause(interval_ms);
    }
    if (chunked) co_return co_await write("0\r\n\r\n");
    co_return true;
  }

  net::awaitable<bool> sse(std::string query) {
    const std::uint64_t events = query_number(query, "events").value_or(1);
    const std::uint64_t interval_ms = query_number(query, "interval_ms").value_or(100);
    if (!co_await write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n")) {
      co_return false;
    }
    co_return co_await body_watched(sse_events(events, interval_ms));
  }

  net::awaitable<bool> sse_events(std::uint64_t events, std::uint64_t interval_ms) {
    for (std::uint64_t n = 1; n <= events; ++n) {
      co_await pause(interval_ms);
      const std::string event = "data: " + std::to_string(n) + " " + std::to_string(monotonic_ns()) + "\n\n";
      if (!co_await write(hex(event.size()) + "\r\n" + event + "\r\n")) co_return false;
    }
    co_return co_await write("0\r\n\r\n");
  }

  tcp::socket socket_;
  beast::flat_buffer buffer_;
  Counters& counters_;
  bool keep_alive_ = true;
  std::string response_;
};

net::awaitable<void> accept_loop(tcp::acceptor& acceptor, Counters& counters) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) co_return;
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<Session>(std::move(socket), counters);
    net::co_spawn(acceptor.get_executor(), session->run(), net::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string_view(argv[i]) == "--listen") listen = argv[i + 1];
  }
  const auto colon = listen.rfind(':');
  try {
    net::io_context io{1};
    const tcp::endpoint endpoint(net::ip::make_address(listen.substr(0, colon)),
                                 static_cast<std::uint16_t>(std::stoul(listen.substr(colon + 1))));
    tcp::acceptor acceptor(io, endpoint);
    Counters counters;
    net::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&io](beast::error_code, int) { io.stop(); });
    net::co_spawn(io, accept_loop(acceptor, counters), net::detached);
    std::cout << "listening " << acceptor.local_endpoint().address().to_string() << ':'
              << acceptor.local_endpoint().port() << std::endl;
    io.run();
  } catch (const std::exception& e) {
    std::cerr << "idem-stream-upstream: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
