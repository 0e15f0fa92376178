#include "http/upstream_pool.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <iterator>
#include <stdexcept>
#include <tuple>

#include "core/streamed_framing.hpp"
#include "wire/client_stream.hpp"
#include "http/message_rewriting.hpp"
#include "tls/tls_context.hpp"
#include "tls/tls_session.hpp"
#include "log/log.hpp"
#include "wire/body_pump.hpp"
#include "wire/response_head.hpp"

namespace idem::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using core::UpstreamFailure;
using tls::load_upstream_tls;
using tls::tls_error_text;
using tls::UpstreamTlsResult;
using wire::is_connection_gone;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kResponseHeaderLimit = 64 * 1024;

// The pooled exchange's reads: under the one deadline set for the exchange (a passed deadline
// closes the socket; the caller tells a timeout by transport.timed_out()).
struct UnderDeadline {
  wire::ClientStream& transport;
  asio::awaitable<wire::IoResult> read_some(asio::mutable_buffer buffer) {
    if (transport.tls) return transport.tls->async_read_some(buffer, use_tuple);
    return transport.socket.async_read_some(buffer, use_tuple);
  }
};

// The host's addresses, looked up once (start-up): a literal needs no lookup. A unix socket is its path.
std::vector<wire::Endpoint> resolve_upstream(asio::io_context& io, const UpstreamOptions& upstream) {
  if (!upstream.socket_path.empty())
    return {wire::Endpoint(asio::local::stream_protocol::endpoint(upstream.socket_path))};
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(upstream.host, ec);
  if (!ec) return {wire::Endpoint(tcp::endpoint(address, upstream.port))};
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(upstream.host, std::to_string(upstream.port), ec);
  if (ec || results.empty()) {
    throw std::runtime_error("upstream " + upstream.name + ": cannot resolve " + upstream.host + ": " +
                             (ec ? ec.message() : std::string("no address")));
  }
  std::vector<wire::Endpoint> endpoints;
  for (const auto& entry : results) endpoints.emplace_back(entry.endpoint());
  return endpoints;
}

std::shared_ptr<asio::ssl::context> upstream_tls_context(const tls::UpstreamTlsOptions& tls) {
  if (!tls.enabled) return nullptr;
  UpstreamTlsResult loaded = load_upstream_tls(tls);
  if (!loaded.context) throw std::runtime_error(loaded.error);
  return std::move(loaded.context);
}
}  // namespace

UpstreamPool::UpstreamPool(asio::io_context& io, const UpstreamOptions& upstream, std::size_t max_connections)
    : io_(io),
      name_(upstream.name),
      endpoints_(resolve_upstream(io, upstream)),
      unix_socket_(upstream.socket_path),
      tls_(upstream_tls_context(upstream.tls)),
      tls_name_(upstream.tls.server_name.empty() ? upstream.host : upstream.tls.server_name),
      tls_verify_(upstream.tls.verify),
      connect_timeout_(upstream.connect_timeout),
      idle_timeout_(upstream.idle_timeout),
      max_connections_(max_connections == 0 ? 1 : max_connections) {}

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
    log::warn("upstream_connect_failed", {{"upstream", name_}, {"error", ec.message()}});
    co_return UpstreamFailure::connect_failed;
  }
  beast::error_code ignored;
  if (unix_socket_.empty()) transport.socket.set_option(tcp::no_delay(true), ignored);
  // The handshake gets a connect timeout of its own.
  if (const auto failure = co_await connection.transport->handshake(tls_name_, tls_verify_, connect_timeout_)) {
    log::warn("upstream_tls_failed", {{"upstream", name_}, {"server_name", tls_name_}, {"reason", *failure}});
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

asio::awaitable<UpstreamResult> UpstreamPool::exchange(const UpstreamRequest& request, std::size_t keep_up_to,
                                                       std::chrono::milliseconds timeout) {
  // Two clock readings per exchange: this one, and the one that ends it.
  const auto started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point finished;
  auto finish = [&](UpstreamResult result) {
    finished = std::chrono::steady_clock::now();
    result.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(finished - started);
    return result;
  };
  auto failed = [&](UpstreamFailure failure) {
    UpstreamResult result;
    result.failure = failure;
    return finish(std::move(result));
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
      if (open_ >= max_connections_) co_return failed(UpstreamFailure::pool_exhausted);
      pooled.emplace(Connection{std::make_unique<Transport>(io_, tls_.get()), Ticket(&open_)});
      const UpstreamFailure failure = co_await open_connection(*pooled);
      if (failure != UpstreamFailure::none) co_return failed(failure);
    }
    Connection& connection = *pooled;
    Transport& transport = *connection.transport;

    // One deadline covers writing the request and reading the response (what of its body is
    // kept). A reused connection was taken at `started`; a new one took its set-up time since.
    if (!response_deadline) response_deadline = (reused ? started : std::chrono::steady_clock::now()) + timeout;
    transport.expire_at(*response_deadline);
    request.write_head(transport.head_buffer());
    auto [write_ec, written] = co_await transport.write(transport.head_buffer(), request.parts().body);
    if (write_ec) {
      // Sent again only if the peer had closed a reused connection before we wrote a byte: once
      // part of the request went out, the upstream may have run it (core::may_send_again).
      if (reused && core::may_send_again({is_connection_gone(write_ec), written, 0, safe})) continue;
      co_return failed(write_ec == beast::error::timeout ? UpstreamFailure::timeout : UpstreamFailure::connection_lost);
    }

    // Read through Beast's parser over a window (wire/): the head, then the body while it fits
    // `keep_up_to`; a longer one goes back open, its parser where it stopped.
    auto open = std::make_unique<OpenResponse>();
    beast::flat_buffer& buffer = transport.buffer;
    UnderDeadline source{transport};
    auto [read_ec, read] = co_await wire::read_response_head(source, buffer, open->parser, kResponseHeaderLimit, head);
    if (read_ec && transport.timed_out()) read_ec = beast::error::timeout;
    if (read_ec) {
      // TLS 1.3: a server checks our certificate after we consider the handshake done, so its
      // refusal arrives in place of the response; its application never saw the request.
      if (!reused && transport.handshake_refused(read_ec, read)) {
        log::warn("upstream_tls_failed",
                  {{"upstream", name_},
                   {"server_name", tls_name_},
                   {"reason", "the upstream rejected the TLS handshake: " + tls_error_text(read_ec)}});
        co_return failed(UpstreamFailure::tls_failed);
      }
      if (read_ec == beast::error::timeout) co_return failed(UpstreamFailure::timeout);
      // A reused connection closed with not one byte of answer: the upstream may have dropped an
      // idle connection as we wrote to it, or read the request and died. Only safe methods are
      // re-sent; for the others the outcome is unknown and the idempotency layer decides.
      if (reused && core::may_send_again({is_connection_gone(read_ec), written, read, safe})) continue;
      co_return failed(is_connection_gone(read_ec) ? UpstreamFailure::connection_lost : UpstreamFailure::bad_response);
    }
    wire::StreamedResponseParser& parser = *open->parser;
    // 101: the upstream switched protocols, which no request of ours asks for (Upgrade is
    // hop-by-hop: never forwarded). It read the request, so the outcome is unknown; the
    // connection is no longer HTTP and is closed with the transport.
    if (parser.get().result() == beast_http::status::switching_protocols) {
      co_return failed(UpstreamFailure::switched_protocols);
    }
    // Trailer fields after a chunked body are not the answer's header fields: never stored or
    // replayed as such (the parser adds them to the message).
    const auto head_fields = std::distance(parser.get().begin(), parser.get().end());
    // A body coded by its transfer (`gzip, chunked`) is never kept: it could only be stored
    // decoded of its chunks and replayed without its coding, which a client reads as garbage. It
    // goes on open, named, as a body past the limit does.
    std::string body;
    boost::system::error_code body_ec;
    const bool coded = core::names_other_codings(transfer_codings(parser.get()));
    wire::BodyKept kept = wire::BodyKept::past_limit;
    if (!coded || parser.is_done()) {
      // (Not inside ?: : GCC 12 mishandles co_await there.)
      kept = co_await wire::read_body_up_to(parser, buffer, source, body, keep_up_to, body_ec);
    }
    if (kept == wire::BodyKept::failed) {
      if (transport.timed_out()) co_return failed(UpstreamFailure::timeout);
      co_return failed(is_connection_gone(body_ec) ? UpstreamFailure::connection_lost : UpstreamFailure::bad_response);
    }

    // A 1xx, 204 or 304 has no body whatever its fields say (RFC 9110 §6.4.1); one that still
    // announces a length or a coding comes from an upstream that may send the bytes anyway, after
    // we stopped reading: they would be read as the next request's response. Such a connection is
    // not reused (nor one with bytes already buffered past the response).
    const unsigned status = parser.get().result_int();
    const bool bodiless_status = status / 100 == 1 || status == 204 || status == 304;
    const bool stray_body_possible = !head && bodiless_status && announces_body(parser.get());
    // (The request always asks to keep the connection: upstream_request.hpp.)
    const bool reusable = keeps_connection_open(parser.get()) && !parser.need_eof() && !stray_body_possible;
    UpstreamResult result;
    if (kept == wire::BodyKept::past_limit) {
      open->transfer_codings = transfer_codings(parser.get());
      open->reusable = reusable;
      result.response = Response(std::move(parser.get().base()));
      result.response.body() = std::move(body);
      transport.expire_never();
      open->lease = UpstreamLease(*this, std::move(connection), reused);
      result.rest = std::move(open);
      co_return finish(std::move(result));
    }
    auto& message = parser.get();
    for (auto trailer = std::next(message.begin(), head_fields); trailer != message.end();) {
      trailer = message.erase(trailer);
    }
    result.response = Response(std::move(message.base()));
    result.response.body() = std::move(body);
    UpstreamResult answered = finish(std::move(result));
    if (reusable && buffer.size() == 0) {
      transport.expire_never();
      put_idle(std::move(connection), finished);
    }
    co_return answered;
  }
  co_return failed(UpstreamFailure::connection_lost);
}

}  // namespace idem::http
