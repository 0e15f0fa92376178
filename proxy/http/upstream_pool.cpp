#include "http/upstream_pool.hpp"

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "log/log.hpp"

namespace idem::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kResponseHeaderLimit = 64 * 1024;

// A pooled connection may have been closed by the upstream while idle (its keep-alive timeout).
// A non-blocking peek tells without consuming anything: EOF or an error means "do not reuse".
bool looks_alive(tcp::socket& socket) {
  char byte;
  const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return false;                 // orderly close
  if (n > 0) return false;                  // unsolicited bytes: the stream is out of sync
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

bool is_connection_gone(const beast::error_code& ec) {
  return ec == beast_http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}
}  // namespace

std::string_view upstream_failure_name(UpstreamFailure failure) {
  switch (failure) {
    case UpstreamFailure::none: return "none";
    case UpstreamFailure::connect_failed: return "connect_failed";
    case UpstreamFailure::pool_exhausted: return "pool_exhausted";
    case UpstreamFailure::timeout: return "timeout";
    case UpstreamFailure::connection_lost: return "connection_lost";
    case UpstreamFailure::bad_response: return "bad_response";
    case UpstreamFailure::response_too_large: return "response_too_large";
  }
  return "unknown";
}

bool nothing_sent(UpstreamFailure failure) {
  return failure == UpstreamFailure::connect_failed || failure == UpstreamFailure::pool_exhausted;
}

UpstreamPool::UpstreamPool(asio::io_context& io, const config::UpstreamConfig& upstream, std::size_t max_connections,
                           std::size_t max_response_body)
    : io_(io),
      endpoint_(asio::ip::make_address(upstream.host), upstream.port),
      connect_timeout_(upstream.connect_timeout),
      timeout_(upstream.timeout),
      idle_timeout_(upstream.idle_timeout),
      max_connections_(max_connections == 0 ? 1 : max_connections),
      max_response_body_(max_response_body) {}


std::optional<UpstreamPool::Connection> UpstreamPool::take_idle() {
  const auto now = std::chrono::steady_clock::now();
  while (!idle_.empty()) {
    Connection connection = std::move(idle_.back());
    idle_.pop_back();
    if (now - connection.idle_since < idle_timeout_ && looks_alive(connection.stream.socket())) return connection;
    beast::error_code ignored;
    connection.stream.socket().close(ignored);
  }
  return std::nullopt;
}

void UpstreamPool::put_idle(Connection&& connection) {
  connection.idle_since = std::chrono::steady_clock::now();
  idle_.push_back(std::move(connection));
}

void UpstreamPool::close_idle() {
  for (auto& connection : idle_) {
    beast::error_code ignored;
    connection.stream.socket().close(ignored);
  }
  idle_.clear();
}

asio::awaitable<UpstreamResult> UpstreamPool::exchange(const Request& request) {
  const auto started = std::chrono::steady_clock::now();
  auto finish = [&](UpstreamResult result) {
    result.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
    return result;
  };
  const bool head = request.method() == beast_http::verb::head;

  // Two attempts at most: the second only when a reused connection turned out to be closed
  // before the upstream could have read the request (see below).
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::optional<Connection> pooled = take_idle();
    const bool reused = pooled.has_value();
    if (!pooled) {
      if (open_ >= max_connections_) co_return finish({UpstreamFailure::pool_exhausted, {}, {}});
      pooled.emplace(Connection{beast::tcp_stream(io_), Ticket(&open_)});
      pooled->stream.expires_after(connect_timeout_);
      auto [ec] = co_await pooled->stream.async_connect(endpoint_, use_tuple);
      if (ec) {
        log::warn("upstream_connect_failed", {{"error", ec.message()}});
        co_return finish({UpstreamFailure::connect_failed, {}, {}});
      }
      pooled->stream.socket().set_option(tcp::no_delay(true));
    }
    Connection& connection = *pooled;

    // One deadline covers writing the request and reading the whole response.
    connection.stream.expires_after(timeout_);
    auto [write_ec, written] = co_await beast_http::async_write(connection.stream, request, use_tuple);
    if (write_ec) {
      // The peer closed a reused connection before we wrote: it cannot have read this request.
      if (reused && is_connection_gone(write_ec)) continue;
      co_return finish({write_ec == beast::error::timeout ? UpstreamFailure::timeout : UpstreamFailure::connection_lost, {}, {}});
    }

    beast_http::response_parser<beast_http::string_body> parser;
    parser.header_limit(kResponseHeaderLimit);
    parser.body_limit(max_response_body_);
    if (head) parser.skip(true);
    beast::flat_buffer buffer;
    auto [read_ec, read] = co_await beast_http::async_read(connection.stream, buffer, parser, use_tuple);
    if (read_ec) {
      if (read_ec == beast::error::timeout) co_return finish({UpstreamFailure::timeout, {}, {}});
      if (read_ec == beast_http::error::body_limit) {
        UpstreamResult result{UpstreamFailure::response_too_large, {}, {}};
        result.response.result(parser.get().result_int());
        co_return finish(std::move(result));
      }
      // A reused connection closed with not one byte of answer: the upstream dropped an idle
      // connection as we wrote to it. Only safe methods are re-sent; for the others the outcome
      // is unknown and the idempotency layer decides.
      const bool safe = request.method() == beast_http::verb::get || head ||
                        request.method() == beast_http::verb::options;
      if (reused && safe && read == 0 && is_connection_gone(read_ec)) continue;
      co_return finish({is_connection_gone(read_ec) ? UpstreamFailure::connection_lost : UpstreamFailure::bad_response, {}, {}});
    }

    UpstreamResult result{UpstreamFailure::none, parser.release(), {}};
    if (result.response.keep_alive() && request.keep_alive() && buffer.size() == 0) {
      connection.stream.expires_never();
      put_idle(std::move(connection));
    }
    co_return finish(std::move(result));
  }
  co_return finish({UpstreamFailure::connection_lost, {}, {}});
}

}  // namespace idem::http
