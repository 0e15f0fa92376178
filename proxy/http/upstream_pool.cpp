#include "http/upstream_pool.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <stdexcept>
#include <tuple>

#include "tls/client_stream.hpp"
#include "http/message_rewriting.hpp"
#include "tls/tls_context.hpp"
#include "tls/tls_session.hpp"
#include "log/log.hpp"

namespace idem::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using core::UpstreamFailure;
using tls::ClientStream;
using tls::load_upstream_tls;
using tls::tls_error_text;
using tls::UpstreamTlsResult;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kResponseHeaderLimit = 64 * 1024;

// A TLS peer that closes without close_notify shows up as a truncated stream.
bool is_connection_gone(const beast::error_code& ec) {
  return ec == beast_http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated;
}

// Whether a response's fields announce a body: a length other than 0, or a coding. (Looked up only
// for a status that has no body: three lookups by name otherwise spent on every response.)
bool announces_body(const Response& response) {
  return response.count(beast_http::field::transfer_encoding) > 0 ||
         (response.count(beast_http::field::content_length) > 0 && response[beast_http::field::content_length] != "0");
}

// The host's addresses, looked up once (start-up): a literal needs no lookup.
std::vector<tcp::endpoint> resolve_upstream(asio::io_context& io, const config::UpstreamConfig& upstream) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(upstream.host, ec);
  if (!ec) return {tcp::endpoint(address, upstream.port)};
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(upstream.host, std::to_string(upstream.port), ec);
  if (ec || results.empty()) {
    throw std::runtime_error("upstream.url: cannot resolve " + upstream.host + ": " +
                             (ec ? ec.message() : std::string("no address")));
  }
  std::vector<tcp::endpoint> endpoints;
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  return endpoints;
}

std::shared_ptr<asio::ssl::context> upstream_tls_context(const config::UpstreamTlsConfig& tls) {
  if (!tls.enabled) return nullptr;
  UpstreamTlsResult loaded = load_upstream_tls(tls);
  if (!loaded.context) throw std::runtime_error(loaded.error);
  return std::move(loaded.context);
}
}  // namespace

UpstreamPool::UpstreamPool(asio::io_context& io, const config::UpstreamConfig& upstream, std::size_t max_connections,
                           std::size_t max_response_body)
    : io_(io),
      endpoints_(resolve_upstream(io, upstream)),
      tls_(upstream_tls_context(upstream.tls)),
      tls_name_(upstream.tls.server_name.empty() ? upstream.host : upstream.tls.server_name),
      tls_verify_(upstream.tls.verify),
      connect_timeout_(upstream.connect_timeout),
      timeout_(upstream.timeout),
      idle_timeout_(upstream.idle_timeout),
      max_connections_(max_connections == 0 ? 1 : max_connections),
      max_response_body_(max_response_body) {}

UpstreamPool::~UpstreamPool() = default;

std::optional<UpstreamPool::Connection> UpstreamPool::take_idle(std::chrono::steady_clock::time_point now) {
  while (!idle_.empty()) {
    Connection connection = std::move(idle_.back());
    idle_.pop_back();
    // The upstream may have closed it while idle (its keep-alive timeout), or sent bytes nobody
    // asked for, which would be read as the next request's response.
    if (now - connection.idle_since < idle_timeout_ && connection.transport->ready_for_next_request())
      return connection;
    connection.transport->close();
  }
  return std::nullopt;
}

void UpstreamPool::put_idle(Connection&& connection, std::chrono::steady_clock::time_point now) {
  connection.idle_since = now;
  idle_.push_back(std::move(connection));
}

void UpstreamPool::close_idle() {
  for (auto& connection : idle_) connection.transport->close();
  idle_.clear();
}

asio::awaitable<UpstreamFailure> UpstreamPool::open_connection(Connection& connection) {
  Transport& transport = *connection.transport;
  transport.expire_after(connect_timeout_);
  if (const auto ec = co_await transport.connect(endpoints_)) {
    log::warn("upstream_connect_failed", {{"error", ec.message()}});
    co_return UpstreamFailure::connect_failed;
  }
  beast::error_code ignored;
  transport.tcp.set_option(tcp::no_delay(true), ignored);
  // The handshake gets a connect timeout of its own.
  if (const auto failure = co_await connection.transport->handshake(tls_name_, tls_verify_, connect_timeout_)) {
    log::warn("upstream_tls_failed", {{"server_name", tls_name_}, {"reason", *failure}});
    co_return UpstreamFailure::tls_failed;
  }
  co_return UpstreamFailure::none;
}

asio::awaitable<UpstreamFailure> UpstreamPool::acquire(UpstreamLease& lease) {
  const auto now = std::chrono::steady_clock::now();
  if (std::optional<Connection> pooled = take_idle(now)) {
    lease = UpstreamLease(*this, std::move(*pooled), true);
    co_return UpstreamFailure::none;
  }
  if (open_ >= max_connections_) co_return UpstreamFailure::pool_exhausted;
  Connection connection{std::make_unique<Transport>(io_, tls_.get()), Ticket(&open_)};
  const UpstreamFailure failure = co_await open_connection(connection);
  if (failure != UpstreamFailure::none) co_return failure;
  lease = UpstreamLease(*this, std::move(connection), false);
  co_return UpstreamFailure::none;
}

asio::awaitable<UpstreamResult> UpstreamPool::exchange(const UpstreamRequest& request) {
  // Two clock readings per exchange: this one, and the one that ends it.
  const auto started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point finished;
  auto stamp = [&](UpstreamResult& result) {
    finished = std::chrono::steady_clock::now();
    result.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(finished - started);
  };
  auto finish = [&](UpstreamResult result) {
    stamp(result);
    return result;
  };
  const beast_http::verb method = request.parts().method;
  const bool head = method == beast_http::verb::head;
  const bool safe = method == beast_http::verb::get || head || method == beast_http::verb::options;

  // Two attempts at most: the second only when a reused connection turned out to be closed
  // before the upstream could have read any of the request (see below). One response deadline
  // covers both, so a replaced connection costs one connection set-up, never a second `timeout`:
  // the timing model (core/exchange_timing.hpp) counts on that.
  std::optional<std::chrono::steady_clock::time_point> response_deadline;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::optional<Connection> pooled = take_idle(started);
    const bool reused = pooled.has_value();
    if (!pooled) {
      if (open_ >= max_connections_) co_return finish({UpstreamFailure::pool_exhausted, {}, {}});
      pooled.emplace(Connection{std::make_unique<Transport>(io_, tls_.get()), Ticket(&open_)});
      const UpstreamFailure failure = co_await open_connection(*pooled);
      if (failure != UpstreamFailure::none) co_return finish({failure, {}, {}});
    }
    Connection& connection = *pooled;
    Transport& transport = *connection.transport;

    // One deadline covers writing the request and reading the whole response. A reused connection
    // was taken at `started`; a new one took its set-up time since.
    if (!response_deadline) response_deadline = (reused ? started : std::chrono::steady_clock::now()) + timeout_;
    transport.expire_at(*response_deadline);
    request.write_head(transport.head_buffer());
    auto [write_ec, written] = co_await transport.write(transport.head_buffer(), request.parts().body);
    if (write_ec) {
      // Sent again only if the peer had closed a reused connection before we wrote a byte: once
      // part of the request went out, the upstream may have run it (core::may_send_again).
      if (reused && core::may_send_again({is_connection_gone(write_ec), written, 0, safe})) continue;
      co_return finish(
          {write_ec == beast::error::timeout ? UpstreamFailure::timeout : UpstreamFailure::connection_lost, {}, {}});
    }

    std::optional<ClientStream::ResponseParser> parser;
    beast::flat_buffer& buffer = transport.buffer;
    // A named local, not a braced temporary: GCC 12 mishandles temporaries inside co_await.
    const ClientStream::ResponseLimits limits{
        .header_bytes = kResponseHeaderLimit, .body_bytes = max_response_body_, .head = head};
    auto [read_ec, read] = co_await transport.read_final_response(buffer, parser, limits);
    if (read_ec) {
      // TLS 1.3: a server checks our certificate after we consider the handshake done, so its
      // refusal arrives in place of the response; its application never saw the request.
      if (!reused && transport.handshake_refused(read_ec, read)) {
        log::warn("upstream_tls_failed",
                  {{"server_name", tls_name_},
                   {"reason", "the upstream rejected the TLS handshake: " + tls_error_text(read_ec)}});
        co_return finish({UpstreamFailure::tls_failed, {}, {}});
      }
      if (read_ec == beast::error::timeout) co_return finish({UpstreamFailure::timeout, {}, {}});
      if (read_ec == beast_http::error::body_limit) {
        UpstreamResult result{UpstreamFailure::response_too_large, {}, {}};
        result.response.result(parser->get().result_int());
        co_return finish(std::move(result));
      }
      // A reused connection closed with not one byte of answer: the upstream may have dropped an
      // idle connection as we wrote to it, or read the request and died. Only safe methods are
      // re-sent; for the others the outcome is unknown and the idempotency layer decides.
      if (reused && core::may_send_again({is_connection_gone(read_ec), written, read, safe})) continue;
      co_return finish(
          {is_connection_gone(read_ec) ? UpstreamFailure::connection_lost : UpstreamFailure::bad_response, {}, {}});
    }

    // 101: the upstream switched protocols, which no request of ours asks for (Upgrade is
    // hop-by-hop: never forwarded). It read the request, so the outcome is unknown; the
    // connection is no longer HTTP and is closed with the transport.
    if (parser->get().result() == beast_http::status::switching_protocols) {
      co_return finish({UpstreamFailure::switched_protocols, {}, {}});
    }
    UpstreamResult result{UpstreamFailure::none, parser->release(), {}};
    // A 1xx, 204 or 304 has no body whatever its fields say (RFC 9110 §6.4.1); one that still
    // announces a length or a coding comes from an upstream that may send the bytes anyway, after
    // we stopped reading: they would be read as the next request's response. Such a connection is
    // not reused (nor one with bytes already buffered past the response).
    const unsigned status = result.response.result_int();
    const bool bodiless_status = status / 100 == 1 || status == 204 || status == 304;
    const bool stray_body_possible = !head && bodiless_status && announces_body(result.response);
    stamp(result);
    // (The request always asks to keep the connection: upstream_request.hpp.)
    if (keeps_connection_open(result.response) && buffer.size() == 0 && !stray_body_possible) {
      transport.expire_never();
      put_idle(std::move(connection), finished);
    }
    co_return result;
  }
  co_return finish({UpstreamFailure::connection_lost, {}, {}});
}

}  // namespace idem::http
