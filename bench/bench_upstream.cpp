// idem-bench-upstream: the fastest honest upstream for the bench. A Beast keep-alive HTTP/1.1
// server answering every request with one fixed small JSON body (prebuilt bytes, no per-response
// formatting), counting the requests it executes, and answering GET /__count with that count.
//
//   idem-bench-upstream [--port P] [--threads N] [--delay-ms D]
//
// Prints "listening 127.0.0.1:PORT" once it accepts. SIGTERM/SIGINT stop it (exit 0).
// A request header "Bench-Delay-Ms: D" delays that one response (at most 10 s);
// "Bench-Body-Bytes: N" makes its body N bytes long (padded_body, at most 1 MiB).
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <charconv>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_protocol.hpp"

namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using namespace idem::bench;

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::seconds kIdleTimeout{120};  // longer than any proxy's pooled-connection idle time
constexpr std::uint32_t kHeaderLimit = 16 * 1024;
constexpr std::uint64_t kBodyLimit = 1024 * 1024;
constexpr unsigned kMaxThreads = 64;

struct Options {
  std::uint16_t port = 0;
  unsigned threads = 1;
  std::chrono::milliseconds delay{0};
};

std::atomic<std::uint64_t> g_executions{0};

std::string fixed_response(bool keep_alive) {
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(kUpstreamBody.size()) + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += kUpstreamBody;
  return out;
}
const std::string kKeepAliveResponse = fixed_response(true);
const std::string kCloseResponse = fixed_response(false);

std::string count_response(bool keep_alive) {
  const std::string body = "{\"executions\":" + std::to_string(g_executions.load()) + "}";
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  return out + "\r\n" + body;
}

std::optional<unsigned long> parse_number(std::string_view text) {
  unsigned long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The padded response a Bench-Body-Bytes request asks for; nullopt when it asks for none.
std::optional<std::string> padded_response(const http::request<http::string_body>& request, bool keep_alive) {
  const auto it = request.find(kBodyBytesHeader);
  if (it == request.end()) return std::nullopt;
  const auto bytes = parse_number(it->value());
  if (!bytes) return std::nullopt;
  const std::string body = padded_body(std::min<std::size_t>(*bytes, kMaxBodyBytes));
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  return out + "\r\n" + body;
}

std::chrono::milliseconds delay_for(const http::request<http::string_body>& request, std::chrono::milliseconds fallback) {
  const auto it = request.find(kDelayHeader);
  if (it == request.end()) return fallback;
  const auto parsed = parse_number(it->value());
  if (!parsed) return fallback;
  return std::min(std::chrono::milliseconds(*parsed), kMaxDelay);
}

asio::awaitable<void> serve(tcp::socket socket, std::chrono::milliseconds default_delay) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  boost::system::error_code ignored;
  stream.socket().set_option(tcp::no_delay(true), ignored);
  std::optional<asio::steady_timer> delay_timer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    stream.expires_after(kIdleTimeout);
    auto [read_ec, read] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (read_ec) break;
    const auto& request = parser.get();
    const bool keep_alive = request.keep_alive();

    std::string built;  // a response made for this request (count, padded body); usually none
    const std::string* response = keep_alive ? &kKeepAliveResponse : &kCloseResponse;
    if (request.method() == http::verb::get && request.target() == kCountPath) {
      built = count_response(keep_alive);
      response = &built;
    } else {
      g_executions.fetch_add(1, std::memory_order_relaxed);
      if (auto padded = padded_response(request, keep_alive)) {
        built = std::move(*padded);
        response = &built;
      }
      if (const auto delay = delay_for(request, default_delay); delay.count() > 0) {
        if (!delay_timer) delay_timer.emplace(stream.get_executor());
        delay_timer->expires_after(delay);
        co_await delay_timer->async_wait(use_tuple);
      }
    }
    stream.expires_after(std::chrono::seconds(30));
    auto [write_ec, written] = co_await asio::async_write(stream, asio::buffer(*response), use_tuple);
    if (write_ec || !keep_alive) break;
  }
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, std::chrono::milliseconds delay) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      continue;  // EMFILE and the like: keep serving the connections we have
    }
    asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), delay), asio::detached);
  }
}

tcp::acceptor bind_acceptor(asio::io_context& io, std::uint16_t port) {
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
  tcp::acceptor acceptor(io);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  // One acceptor per thread on the same port: the kernel spreads new connections across them.
  const int on = 1;
  if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
    throw boost::system::system_error(errno, boost::system::system_category(), "SO_REUSEPORT");
  }
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  return acceptor;
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "idem-bench-upstream: missing value after " << arg << "\n";
      return std::nullopt;
    }
    const auto value = parse_number(argv[++i]);
    if (arg == "--port" && value && *value <= 65535) {
      options.port = static_cast<std::uint16_t>(*value);
    } else if (arg == "--threads" && value && *value >= 1 && *value <= kMaxThreads) {
      options.threads = static_cast<unsigned>(*value);
    } else if (arg == "--delay-ms" && value && std::chrono::milliseconds(*value) <= kMaxDelay) {
      options.delay = std::chrono::milliseconds(*value);
    } else {
      std::cerr << "idem-bench-upstream: bad argument " << arg << " " << argv[i]
                << "\nusage: idem-bench-upstream [--port P] [--threads N] [--delay-ms D]\n";
      return std::nullopt;
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = parse_options(argc, argv);
  if (!options) return 2;

  // Signals are taken by the main thread only, synchronously.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<tcp::acceptor> acceptors;
  std::uint16_t port = options->port;
  try {
    for (unsigned t = 0; t < options->threads; ++t) {
      contexts.push_back(std::make_unique<asio::io_context>(1));
      acceptors.push_back(bind_acceptor(*contexts.back(), port));
      port = acceptors.back().local_endpoint().port();  // --port 0: the others join the one picked
    }
  } catch (const std::exception& e) {
    std::cerr << "idem-bench-upstream: cannot listen: " << e.what() << "\n";
    return 1;
  }
  for (unsigned t = 0; t < options->threads; ++t) {
    asio::co_spawn(*contexts[t], accept_loop(acceptors[t], options->delay), asio::detached);
  }
  std::vector<std::thread> threads;
  for (auto& io : contexts) threads.emplace_back([&io = *io] { io.run(); });
  std::cout << "listening 127.0.0.1:" << port << std::endl;

  int received = 0;
  sigwait(&signals, &received);
  for (auto& io : contexts) io->stop();
  for (auto& thread : threads) thread.join();
  return 0;
}
