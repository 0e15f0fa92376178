#pragma once
// Plain proxying with the bodies streamed both ways, for every request no idempotency rule
// applies to (core/body_handling.hpp decides from the head): the request's body goes upstream as
// it arrives and the answer's body to the client as it comes, each through one window
// (wire/body_pump.hpp), so neither costs memory with its size and a slow side holds the other
// back through TCP. A length stays the length, a chunked body goes on chunk by chunk, a body ended
// by the close ends the client connection too (core/streamed_framing.hpp).
//
// Deadlines bound silences, not bodies: the request body's reads limits.body_timeout each; the
// upstream's answer its route's timeout (else its upstream's) for its head, from the request's end,
// and then its route's stream_idle_timeout (else that timeout) for each read; each write to either
// side limits.write_timeout / the timeout without progress. A
// feed that keeps sending lives as long as it sends.
//
// A failure mid-body is never passed off as an end: the upstream failing or closing early (or
// the window's deadline passing) closes the client connection at once, without the last chunk or
// short of the length (no TLS close_notify either); the client going away closes the upstream
// connection at once (wire/client_gone_watch.hpp), never giving it back to the pool.
//
// An upgrade the request offered (core/upgrade_decision.hpp) goes upstream with its Upgrade and
// `Connection: upgrade`; a 101 switching to an offered protocol turns both connections into a byte
// tunnel (wire/byte_tunnel.hpp): the 101's head goes to the client with its Upgrade and
// Connection, then the bytes either parser already holds past the heads, then whatever either
// side sends, until both have closed, either fails, or limits.tunnel_idle_timeout passes with no
// byte either way. The upstream connection of a tunnel is never given back to the pool. Any other
// answer to such a request is streamed as any other.
//
// Templates on the client's stream: included by client_session_loop.hpp only.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/problem.hpp"
#include "core/stored_headers.hpp"
#include "core/upstream_failure.hpp"
#include "core/streamed_framing.hpp"
#include "http/body_abort.hpp"
#include "http/client_connection.hpp"
#include "http/client_request.hpp"
#include "http/message_rewriting.hpp"
#include "http/proxy_metrics.hpp"
#include "http/request_handler.hpp"
#include "http/request_trace.hpp"
#include "http/upstream.hpp"
#include "http/upstream_request.hpp"
#include "log/log.hpp"
#include "core/upgrade_decision.hpp"
#include "wire/body_pump.hpp"
#include "wire/byte_tunnel.hpp"
#include "wire/client_gone_watch.hpp"
#include "wire/close_notify.hpp"
#include "wire/response_head.hpp"
#include "wire/stream_io.hpp"

namespace idem::http {

// The window functions the body pump finds by argument-dependent lookup.
inline void body_window(ClientRequestParser& parser, char* data, std::size_t size) { parser.body_window(data, size); }
inline std::size_t body_window_left(const ClientRequestParser& parser) { return parser.body_window_left(); }

namespace streaming {
namespace asio = boost::asio;
namespace beast = boost::beast;

inline constexpr std::uint32_t kResponseHeaderLimit = 64 * 1024;

// What the client connection does after a streamed exchange.
struct StreamedOutcome {
  // Set: nothing was sent to the client; it gets this answer. When the request's body was not
  // read to its end (`request_read` false), the connection closes after it.
  std::optional<core::Problem> problem;
  bool request_read = true;
  bool refused = false;     // the problem refuses the request itself (413, 400): answered as a refusal
  bool keep_alive = false;  // the connection may serve its next request
  unsigned status = 0;      // the status the client got; 0 when none (it went away first)
  BodyTally bodies;         // what the bodies moved, and which side cut one short
};

// The client's side of the pumps: the request body's reads, the response's writes. (Each returns
// the awaitable of wire's operation rather than awaiting it: no coroutine frame of its own.)
template <class Stream>
struct ClientEnd {
  Stream& stream;
  ClientConnection& connection;
  std::chrono::milliseconds read_timeout;
  std::chrono::milliseconds write_timeout;

  asio::awaitable<wire::IoResult> read_some(asio::mutable_buffer buffer) {
    return wire::read_some_within(stream, buffer, connection.deadline, read_timeout);
  }
  template <class Buffers>
  asio::awaitable<wire::IoResult> write(const Buffers& buffers) {
    return wire::write_within(stream, buffers, connection.deadline, write_timeout);
  }
};

// The upstream's side: the request's writes, the response's reads (each bounded by `timeout`).
// With a watch, the first read that waits starts watching the client (the answer may take long).
struct UpstreamEnd {
  UpstreamTransport& transport;
  std::chrono::milliseconds timeout;
  wire::ClientGoneWatch* watch = nullptr;
  // Set: every read ends by then (a head's reads: one deadline for the head, not one per silence).
  std::chrono::steady_clock::time_point until{};

  asio::awaitable<wire::IoResult> read_some(asio::mutable_buffer buffer) {
    if (watch != nullptr) watch->arm(transport.socket);
    std::chrono::milliseconds wait = timeout;
    if (until != std::chrono::steady_clock::time_point{}) {
      wait = std::max(std::chrono::milliseconds::zero(),
                      std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()));
    }
    if (transport.tls) return wire::read_some_within(*transport.tls, buffer, transport, wait);
    return wire::read_some_within(transport.socket, buffer, transport, wait);
  }
  template <class Buffers>
  asio::awaitable<wire::IoResult> write(const Buffers& buffers) {
    if (transport.tls) return wire::write_within(*transport.tls, buffers, transport, timeout);
    return wire::write_within(transport.socket, buffers, transport, timeout);
  }
};

using wire::is_connection_gone;

// A window as large as a body known to be smaller: a small message's fits in the coroutine's
// frame and costs no allocation.
class Window {
 public:
  explicit Window(std::size_t size)
      : heap_(size > kInline ? new char[size] : nullptr), data_(heap_ ? heap_.get() : inline_), size_(size) {}
  Window(const Window&) = delete;  // data_ may point into this object
  Window& operator=(const Window&) = delete;
  std::span<char> span() { return {data_, size_}; }

 private:
  static constexpr std::size_t kInline = 512;
  std::unique_ptr<char[]> heap_;
  char inline_[kInline];
  char* data_;
  std::size_t size_;
};
inline std::size_t window_size(bool has_body, const boost::optional<std::uint64_t>& length) {
  if (!has_body) return 0;
  if (!length) return wire::kBodyWindow;
  return static_cast<std::size_t>(std::min<std::uint64_t>(*length, wire::kBodyWindow));
}

// An upstream's answer on its way to the client: its head (the upstream's own fields already
// stripped), the body's first bytes when the exchange kept some, its parser in the middle of the
// body, its connection.
struct AnswerInFlight {
  beast_http::response_header<>& head;
  std::string_view kept_body;
  wire::StreamedResponseParser& parser;
  UpstreamLease& lease;
  core::UpstreamFraming upstream_framing;  // its codings outlive the relay
  bool reusable = false;                   // the connection may serve another exchange after this body
  // The request was guarded: it ran, its record is settled, and this is its only delivery. The
  // client is not watched: a client that half-closes after its request (shutdown(SHUT_WR), as
  // `nc -N` does) looks gone to the watch, and would lose an answer no retry can get back. A
  // client really gone is found at the next write.
  bool guarded = false;
};

// Frames the answer for the client (core/streamed_framing.hpp), writes its head and streams its
// body. The request was read whole: a refusal (a coding an HTTP/1.0 client cannot receive) is
// returned as the problem to answer. `on_head(status)` runs just before the head is written.
template <class Stream, class OnHead>
asio::awaitable<StreamedOutcome> relay_answer(Stream& stream, ClientConnection& connection,
                                              const AnswerInFlight& answer, unsigned client_version, bool head_request,
                                              bool keep_alive, std::chrono::milliseconds upstream_timeout,
                                              std::chrono::milliseconds write_timeout, std::string& head_buffer,
                                              OnHead on_head) {
  StreamedOutcome outcome;
  auto& head = answer.head;
  const unsigned status = head.result_int();
  const core::StreamedFraming framing =
      core::streamed_framing(status, head_request, answer.upstream_framing, client_version);
  if (framing.refusal) {
    outcome.problem = framing.refusal;
    co_return outcome;
  }
  outcome.keep_alive = keep_alive && !framing.close_after;
  frame_streamed_head(head, framing);
  // Every Connection line went with the upstream's fields: HTTP/1.1 stays open without one,
  // HTTP/1.0 closes without one.
  if (head.version() >= 11 && !outcome.keep_alive) head.set(beast_http::field::connection, "close");
  if (head.version() < 11 && outcome.keep_alive) head.set(beast_http::field::connection, "keep-alive");
  wire::write_head(head, head_buffer);
  outcome.status = status;
  on_head(status);

  wire::StreamedResponseParser& parser = answer.parser;
  UpstreamLease& lease = answer.lease;
  ClientEnd<Stream> client{stream, connection, std::chrono::milliseconds::zero(), write_timeout};
  const wire::OutFraming out =
      framing.body == core::StreamedBody::chunked ? wire::OutFraming::chunked : wire::OutFraming::raw;
  std::string_view prefix = head_buffer;
  wire::PumpResult relayed;
  if (!answer.kept_body.empty() && framing.body != core::StreamedBody::none) {
    // The head with the bytes the exchange kept, framed as the rest will be.
    const asio::const_buffer head_bytes(head_buffer.data(), head_buffer.size());
    const asio::const_buffer kept(answer.kept_body.data(), answer.kept_body.size());
    boost::system::error_code ec;
    if (out == wire::OutFraming::chunked) {
      const auto bytes = beast::buffers_cat(head_bytes, beast_http::make_chunk(kept));
      auto [write_ec, n] = co_await client.write(bytes);
      ec = write_ec;
    } else {
      const std::array<asio::const_buffer, 2> bytes{head_bytes, kept};
      auto [write_ec, n] = co_await client.write(bytes);
      ec = write_ec;
    }
    relayed.end = ec ? wire::PumpEnd::sink_failed : wire::PumpEnd::complete;
    relayed.ec = ec;
    if (!ec) outcome.bodies.out = answer.kept_body.size();
    prefix = {};
  }
  // While the body is awaited the client is watched: its going away closes the upstream
  // connection at once (armed by the first read that waits: a small answer that came with its
  // head costs no watch).
  wire::ClientGoneWatch watch(connection.socket);
  if (relayed.end == wire::PumpEnd::complete) {
    const bool streams_body = framing.body != core::StreamedBody::none && !parser.is_done();
    Window window(window_size(streams_body, parser.content_length()));
    UpstreamEnd from_upstream{lease.transport(), upstream_timeout, answer.guarded ? nullptr : &watch};
    relayed =
        co_await wire::pump_body(parser, lease.transport().buffer, from_upstream, client, out, window.span(), prefix);
  }
  outcome.bodies.out += relayed.body_bytes;
  if (relayed.end == wire::PumpEnd::complete) {
    if (answer.reusable && lease.transport().buffer.size() == 0) lease.give_back();
    co_return outcome;
  }
  // Cut short: the client must see an incomplete message, so its connection ends now, without a
  // final chunk, short of its length, or reset (a TLS close_notify or a FIN would make a body
  // ended by the close look complete).
  if (relayed.end != wire::PumpEnd::sink_failed && !watch.client_gone()) {
    log::warn("upstream_body_cut", {{"status", status},
                                    {"body_bytes", static_cast<std::int64_t>(relayed.body_bytes)},
                                    {"error", relayed.ec.message()}});
  }
  outcome.bodies.aborted = answer_body_abort(relayed.end, relayed.ec == beast::error::timeout, watch.client_gone());
  outcome.keep_alive = false;
  lease.close();
  // A body ended by the close would read as complete at a FIN: a reset says it was cut.
  if (framing.body == core::StreamedBody::until_close) {
    connection.reset();
  } else {
    connection.close();
  }
  co_return outcome;
}

// The client's side of a tunnel: reads without a deadline (the tunnel's idle timer watches),
// writes under limits.write_timeout without progress (nginx's send_timeout).
template <class Stream>
struct ClientTunnelEnd {
  Stream& stream;
  ClientConnection& connection;
  std::chrono::milliseconds write_timeout;

  asio::awaitable<wire::IoResult> read_some(asio::mutable_buffer buffer) {
    return stream.async_read_some(buffer, wire::use_tuple);
  }
  // (`buffer` by reference: write_within's frame refers to it until the write completes.)
  asio::awaitable<wire::IoResult> write(const asio::const_buffer& buffer) {
    return wire::write_within(stream, buffer, connection.deadline, write_timeout);
  }
  asio::awaitable<void> shutdown_send() {
    if constexpr (std::is_same_v<Stream, wire::Socket>) {
      boost::system::error_code ignored;
      connection.socket.shutdown(asio::socket_base::shutdown_send, ignored);
    } else {
      connection.deadline.expire_after(write_timeout);
      co_await wire::send_close_notify(stream);
      connection.deadline.expire_never();
    }
  }
  void close() { connection.close(); }
};

// The upstream's side of a tunnel: reads without a deadline, writes under upstream.timeout
// without progress (nginx's proxy_send_timeout).
struct UpstreamTunnelEnd {
  UpstreamTransport& transport;
  std::chrono::milliseconds write_timeout;

  asio::awaitable<wire::IoResult> read_some(asio::mutable_buffer buffer) {
    if (transport.tls) return transport.tls->async_read_some(buffer, wire::use_tuple);
    return transport.socket.async_read_some(buffer, wire::use_tuple);
  }
  asio::awaitable<wire::IoResult> write(const asio::const_buffer& buffer) {
    if (transport.tls) return wire::write_within(*transport.tls, buffer, transport, write_timeout);
    return wire::write_within(transport.socket, buffer, transport, write_timeout);
  }
  asio::awaitable<void> shutdown_send() {
    if (!transport.tls) {
      boost::system::error_code ignored;
      transport.socket.shutdown(asio::socket_base::shutdown_send, ignored);
      co_return;
    }
    transport.expire_after(write_timeout);
    co_await wire::send_close_notify(*transport.tls);
    transport.expire_never();
  }
  void close() { transport.close(); }
};

inline std::string_view tunnel_end_name(wire::TunnelEnd end) {
  switch (end) {
    case wire::TunnelEnd::closed: return "closed";
    case wire::TunnelEnd::idle: return "idle";
    case wire::TunnelEnd::failed: return "failed";
  }
  return "failed";
}

// The upstream switched to `protocols` (its 101's Upgrade): the 101 goes to the client, then both
// connections are one tunnel until it ends; both are closed after it.
template <class Stream, class OnHead>
asio::awaitable<StreamedOutcome> tunnel_after_switch(Stream& stream, ClientConnection& connection,
                                                     beast::flat_buffer& client_buffer,
                                                     beast_http::response_header<>& head, const std::string& protocols,
                                                     UpstreamLease& lease, const RuntimeConfig& config,
                                                     const core::Route* route, std::string& head_buffer,
                                                     OnHead on_head) {
  StreamedOutcome outcome;
  // Hop-by-hop fields go, but a switch is announced with its own two.
  strip_upstream_fields(head, replay_headers_of(route));
  head.erase(beast_http::field::content_length);
  head.set(beast_http::field::connection, "upgrade");
  head.set(beast_http::field::upgrade, protocols);
  wire::write_head(head, head_buffer);
  // What the upstream sent right after its 101 (a first frame) follows the head.
  beast::flat_buffer& from_upstream = lease.transport().buffer;
  head_buffer.append(static_cast<const char*>(from_upstream.data().data()), from_upstream.size());
  from_upstream.consume(from_upstream.size());
  outcome.status = 101;
  on_head(101);

  const ClientLimits& limits = config.options.limits;
  ClientTunnelEnd<Stream> client{stream, connection, limits.write_timeout};
  UpstreamTunnelEnd upstream{lease.transport(), config.terms_for(route).timeout};
  // What the client sent right after its request (its parser read past the head) goes first.
  const std::string_view from_client(static_cast<const char*>(client_buffer.data().data()), client_buffer.size());
  const auto started = std::chrono::steady_clock::now();
  const std::string_view to_client(head_buffer);
  const std::chrono::steady_clock::duration idle_timeout = limits.tunnel_idle_timeout;
  const wire::TunnelResult result = co_await wire::run_tunnel(client, upstream, from_client, to_client, idle_timeout);
  client_buffer.consume(client_buffer.size());
  const auto lasted = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  log::info("tunnel_ended", {{"end", tunnel_end_name(result.end)},
                             {"side", result.end != wire::TunnelEnd::failed            ? ""
                                      : result.failed_side == wire::TunnelSide::client ? "client"
                                                                                       : "upstream"},
                             {"error", result.ec ? result.ec.message() : std::string()},
                             {"client_to_upstream_bytes", static_cast<std::int64_t>(result.client_to_upstream)},
                             {"upstream_to_client_bytes", static_cast<std::int64_t>(result.upstream_to_client)},
                             {"duration_ms", static_cast<std::int64_t>(lasted.count())}});
  // The tunnel's bytes are the route's body bytes, each way.
  outcome.bodies.in = result.client_to_upstream;
  outcome.bodies.out = result.upstream_to_client;
  lease.close();
  connection.close();
  outcome.keep_alive = false;
  co_return outcome;
}

// Every Upgrade line of a head, joined.
inline std::string upgrade_list(const beast_http::fields& fields) {
  std::string joined;
  for (const auto& field : fields) {
    if (field.name() != beast_http::field::upgrade) continue;
    if (!joined.empty()) joined += ", ";
    joined.append(field.value());
  }
  return joined;
}

// Forwards the request whose head `parser` has read (its body not yet) and streams the answer to
// the client. `head_buffer`: the connection's, for the response head. `route`: the matched one,
// or null. `keep_alive`: what the client asked for (and the worker allows). `on_head(status)` runs
// just before the answer's head is written (its metrics and log line are out before a client
// could read it). `upgrade`: the protocols the request may switch to (empty: none), which must
// outlive the call.
template <class Stream, class OnHead>
asio::awaitable<StreamedOutcome> forward_streamed(Stream& stream, ClientConnection& connection,
                                                  const ClientRequest& request, ClientRequestParser& parser,
                                                  beast::flat_buffer& client_buffer, WorkerServices& services,
                                                  const RuntimeConfig& config, const core::Route* route,
                                                  std::string_view client_address, bool keep_alive,
                                                  std::string_view upgrade, std::string& head_buffer,
                                                  RequestTrace& trace, OnHead on_head) {
  const ActiveStream active(services.metrics);
  const RequestParts& parts = request.parts();
  const ClientLimits& limits = config.options.limits;
  const ForwardingTerms terms = config.terms_for(route);
  const std::chrono::milliseconds upstream_timeout = terms.timeout;
  const bool head_request = parts.method == beast_http::verb::head;
  const bool safe_method =
      head_request || parts.method == beast_http::verb::get || parts.method == beast_http::verb::options;
  const bool has_body = !parser.is_done();
  const RequestBodyFraming request_framing = !has_body          ? RequestBodyFraming::whole
                                             : parser.chunked() ? RequestBodyFraming::streamed_chunked
                                                                : RequestBodyFraming::streamed_length;
  const UpstreamRequest upstream_request(parts, client_address, request_framing, parser.content_length().value_or(0),
                                         upgrade);
  ClientEnd<Stream> client{stream, connection, limits.body_timeout, limits.write_timeout};
  const auto started = std::chrono::steady_clock::now();
  StreamedOutcome outcome;
  auto answer = [&](core::Problem problem) {
    outcome.problem = std::move(problem);
    outcome.request_read = parser.is_done();
    return outcome;
  };

  Window request_window(window_size(has_body, parser.content_length()));
  UpstreamLease lease;
  std::optional<wire::StreamedResponseParser> response;
  wire::PumpResult sent;
  for (int attempt = 0;; ++attempt) {
    const core::UpstreamFailure failure = co_await services.upstreams[terms.upstream]->acquire(lease);
    if (failure != core::UpstreamFailure::none) co_return answer(core::upstream_failure_problem(failure));
    UpstreamTransport& transport = lease.transport();

    // The head with the body's first window, then the rest as it comes. A reused connection the
    // upstream had closed before we wrote a byte is replaced and the request sent again whole
    // (the window still holds what the failed write carried); once a byte went out, the upstream
    // may have acted on it (core::may_send_again).
    UpstreamEnd to_upstream{transport, upstream_timeout};
    upstream_request.write_head(transport.head_buffer());
    const wire::OutFraming request_out = parser.chunked() ? wire::OutFraming::chunked : wire::OutFraming::raw;
    sent = co_await wire::pump_body(parser, client_buffer, client, to_upstream, request_out, request_window.span(),
                                    transport.head_buffer(), sent.unsent);
    outcome.bodies.in = sent.body_bytes + sent.unsent;  // unsent: taken from the client, not by the upstream
    switch (sent.end) {
      case wire::PumpEnd::complete: break;
      case wire::PumpEnd::sink_failed:
        // Sent again only while the window holds every body byte read so far: once one window
        // went out, a new connection could only carry the body without its start.
        if (attempt == 0 && lease.reused() && sent.body_bytes == 0 &&
            core::may_send_again({is_connection_gone(sent.ec), sent.bytes_written, 0, safe_method})) {
          lease.close();
          continue;
        }
        if (has_body) outcome.bodies.aborted = request_body_abort(sent.end, sent.ec == beast::error::timeout);
        co_return answer(core::upstream_failure_problem(sent.ec == beast::error::timeout
                                                            ? core::UpstreamFailure::timeout
                                                            : core::UpstreamFailure::connection_lost));
      case wire::PumpEnd::source_failed:  // the client went away or went silent
        outcome.bodies.aborted = request_body_abort(sent.end, sent.ec == beast::error::timeout);
        co_return outcome;
      case wire::PumpEnd::malformed:
        outcome.refused = true;
        co_return answer(sent.ec == beast_http::error::body_limit
                             ? core::request_too_large_problem(terms.max_request_body)
                             : core::bad_request_problem("malformed request body: " + sent.ec.message()));
    }

    // The head of the answer: upstream.timeout from the request's end, for all of the head (an
    // upstream trickling its head byte by byte does not restart it).
    UpstreamEnd from_upstream{transport, upstream_timeout, nullptr,
                              std::chrono::steady_clock::now() + upstream_timeout};
    auto [head_ec, head_bytes] = co_await wire::read_response_head(from_upstream, transport.buffer, response,
                                                                   kResponseHeaderLimit, head_request);
    if (!head_ec) break;
    // TLS 1.3: a server checks our certificate after we consider the handshake done, so its
    // refusal arrives in place of the response; its application never saw the request.
    if (!lease.reused() && transport.handshake_refused(head_ec, head_bytes)) {
      log::warn("upstream_tls_failed", {{"reason", "the upstream rejected the TLS handshake"}});
      co_return answer(core::upstream_failure_problem(core::UpstreamFailure::tls_failed));
    }
    if (head_ec == beast::error::timeout) co_return answer(core::upstream_timeout_problem());
    // A reused connection closed with not one byte of answer: the upstream may have dropped an
    // idle connection as we wrote to it. A safe request is sent again (when it had no body: a
    // streamed one is gone).
    if (attempt == 0 && lease.reused() && !has_body &&
        core::may_send_again({is_connection_gone(head_ec), sent.bytes_written, head_bytes, safe_method})) {
      lease.close();
      sent = {};
      continue;
    }
    co_return answer(core::upstream_failure_problem(is_connection_gone(head_ec) ? core::UpstreamFailure::connection_lost
                                                                                : core::UpstreamFailure::bad_response));
  }
  trace.upstream += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);

  auto& message = response->get();
  // 101: the upstream switched protocols. To one the request offered: a tunnel. Else the request
  // did not ask for it; the connection is no longer HTTP and is closed with the lease.
  if (message.result_int() == 101) {
    const std::string switched_to = upgrade_list(message);
    if (upgrade.empty() || !core::switch_accepted(upgrade, switched_to)) {
      co_return answer(core::upstream_failure_problem(core::UpstreamFailure::switched_protocols));
    }
    const ActiveStream tunnel(services.metrics.active_tunnels);
    co_return co_await tunnel_after_switch(stream, connection, client_buffer, message, switched_to, lease, config,
                                           route, head_buffer, on_head);
  }
  // Whether the upstream connection can serve another exchange once this answer is read: it
  // stays open, and a 204/304 announcing a body it may send anyway is not trusted.
  const unsigned status = message.result_int();
  const bool bodiless_status = status == 204 || status == 304;
  const bool reusable = keeps_connection_open(message) && !response->need_eof() &&
                        !(!head_request && bodiless_status && announces_body(message));
  const std::string codings = transfer_codings(message);
  strip_upstream_fields(message, replay_headers_of(route));
  const AnswerInFlight in_flight{.head = message,
                                 .kept_body = {},
                                 .parser = *response,
                                 .lease = lease,
                                 .upstream_framing = {.has_length = response->content_length().has_value(),
                                                      .chunked = response->chunked(),
                                                      .transfer_codings = codings},
                                 .reusable = reusable};
  StreamedOutcome relayed =
      co_await relay_answer(stream, connection, in_flight, parts.version, head_request, keep_alive,
                            terms.stream_idle_timeout, limits.write_timeout, head_buffer, on_head);
  relayed.bodies.in = outcome.bodies.in;
  co_return relayed;
}

}  // namespace streaming
}  // namespace idem::http
