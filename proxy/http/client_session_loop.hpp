#pragma once
// The definitions behind client_session.hpp: the HTTP/1.1 keep-alive loop and the refusal,
// templates on the stream. Included only by client_session_tcp.cpp and client_session_tls.cpp,
// which instantiate them once each (one TU per stream type halves the compile of either).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>

#include "core/problem.hpp"
#include "core/request_framing.hpp"
#include "core/request_target.hpp"
#include "core/trace_context.hpp"
#include "core/upgrade_decision.hpp"
#include "http/client_request.hpp"
#include "http/client_session.hpp"
#include "http/message_rewriting.hpp"
#include "http/proxy_metrics.hpp"
#include "http/request_handler.hpp"
#include "http/request_trace.hpp"
#include "http/streamed_forwarding.hpp"
#include "wire/buffered_parse.hpp"
#include "wire/http_head.hpp"
#include "tls/tls_session.hpp"
#include "log/log.hpp"

namespace idem::http::session_loop {
namespace asio = boost::asio;
namespace beast = boost::beast;

inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
inline constexpr std::size_t kFirstReadSize = 4096;
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
inline constexpr std::chrono::seconds kLingerTime{2};

// Bytes of "SP HTTP/1.1 CRLF" around the method and target in a request line.
inline constexpr std::size_t kRequestLineFraming = 2 + 8 + 2;

// Whether the request line (CRLF included) is longer than `limit`, after a complete head or after
// Beast stopped at max_header_bytes. Once Beast has parsed the line, its parts are known; until
// then the unparsed bytes start with it, and it is too long only if `limit` bytes have arrived
// with no line end among them. A line that merely did not fit max_header_bytes (set below
// max_request_line) is left to the 431.
inline bool request_line_exceeds(const ClientRequest& request, const beast::flat_buffer& buffer, std::size_t limit) {
  if (const std::size_t parsed = request.request_line_size(); parsed > 0) return parsed + kRequestLineFraming > limit;
  const std::string_view unparsed(static_cast<const char*>(buffer.data().data()), buffer.size());
  return unparsed.size() >= limit && unparsed.substr(0, limit).find('\n') == std::string_view::npos;
}

template <class Stream>
constexpr bool kIsTls = std::is_same_v<Stream, TlsStream>;

// Lingering close (as nginx does): closing with unread request bytes makes the kernel send a
// reset, which can destroy the answer before the client reads it. So half-close, then read and
// discard what the client is still sending, for a bounded time. Over TLS the close_notify
// exchange comes first, under the same deadline.
template <class Stream>
asio::awaitable<void> linger_close(Stream& stream, ClientConnection& connection) {
  connection.deadline.expire_after(kLingerTime);
  if constexpr (kIsTls<Stream>) co_await stream.async_shutdown(use_tuple);
  boost::system::error_code ignored;
  connection.socket.shutdown(asio::socket_base::shutdown_send, ignored);
  std::array<char, 16 * 1024> sink;
  for (;;) {
    auto [ec, n] = co_await connection.socket.async_read_some(asio::buffer(sink), use_tuple);
    if (ec) break;
  }
  connection.socket.close(ignored);  // done with this connection (and with its TLS session, if any)
}

// Writes a response from `head`, a buffer the connection keeps (wire/http_head.hpp); a response
// with a transfer coding goes through Beast's serializer, which applies it.
template <class Stream>
asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> write_response(Stream& stream,
                                                                                   const Response& response,
                                                                                   std::string& head) {
  if (!wire::body_sent_as_is(response)) co_return co_await beast_http::async_write(stream, response, use_tuple);
  wire::write_head(response, head);
  const std::array<asio::const_buffer, 2> message{asio::buffer(head), asio::buffer(response.body())};
  co_return co_await asio::async_write(stream, message, use_tuple);
}

// A request the proxy refuses before reading it whole: answered, then the connection is closed
// (the unread rest of the request would otherwise be taken for the next one).
template <class Stream>
asio::awaitable<void> refuse(Stream& stream, ClientConnection& connection, core::Problem problem, unsigned version,
                             std::string docs_url, std::chrono::milliseconds write_timeout, ProxyMetrics& metrics) {
  metrics.refused(static_cast<unsigned>(problem.status));
  log::info("request_refused", {{"status", problem.status}, {"detail", problem.detail}});
  Response response = problem_response(problem, version, docs_url);
  response.keep_alive(false);
  connection.deadline.expire_after(write_timeout);
  std::string head;
  auto [write_ec, written] = co_await write_response(stream, response, head);
  if (write_ec) co_return;
  co_await linger_close(stream, connection);
}

// The answer when nothing of an upstream's was sent: `problem`, the connection kept for the next
// request only when the client keeps it (`keep_alive`) and its request was read to its end (the
// unread rest would be read as the next request: the connection lingers closed instead).
// Whether the connection serves on. The problem's body, once written, is added to `bodies`.
template <class Stream>
asio::awaitable<bool> answer_problem(Stream& stream, ClientConnection& connection, const core::Problem& problem,
                                     unsigned version, std::string docs_url, bool keep_alive, bool request_read,
                                     std::chrono::milliseconds write_timeout, std::string& head, BodyTally& bodies) {
  keep_alive = keep_alive && request_read;
  Response response = problem_response(problem, version, docs_url);
  if (!keep_alive || version < 11) response.keep_alive(keep_alive);
  connection.deadline.expire_after(write_timeout);
  auto [write_ec, written] = co_await write_response(stream, response, head);
  connection.in_request = false;
  if (write_ec) co_return false;
  bodies.out += response.body().size();
  if (!request_read) co_await linger_close(stream, connection);
  co_return keep_alive;
}

// A streamed exchange's line is written at its end, a whole answer's just before its one write
// (serve_http); `status` is 0 when no answer went out (the client went away first).
inline void log_request(std::string_view method, std::string_view target, unsigned status, const RequestTrace& trace,
                        std::chrono::steady_clock::time_point started) {
  if (!log::enabled(log::Level::info)) return;
  const std::string_view path = target.substr(0, target.find('?'));  // queries may carry secrets
  const auto duration =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);
  log::info("request", {{"method", method},
                        {"path", path},
                        {"route", trace.route},
                        {"decision", trace.decision},
                        {"status", status},
                        {"upstream_us", static_cast<std::int64_t>(trace.upstream.count())},
                        {"store_us", static_cast<std::int64_t>(trace.store.count())},
                        {"cache_hit", trace.cache_hit ? "true" : "false"},
                        {"key_sha256", trace.key.empty() ? std::string() : key_hash(trace.key)},
                        {"traceparent", trace.traceparent},
                        {"request_body_bytes", static_cast<std::int64_t>(trace.bodies.in)},
                        {"response_body_bytes", static_cast<std::int64_t>(trace.bodies.out)},
                        {"duration_us", static_cast<std::int64_t>(duration.count())},
                        {"aborted_by", abort_side_name(trace.bodies.aborted.side)}});
}

// A client or a deadline ended the connection: nothing to answer. (A passed deadline closes the
// socket: the operation under way is aborted, a later one finds no descriptor.)
inline bool is_connection_gone(const boost::system::error_code& ec) {
  return ec == beast_http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
         ec == asio::error::bad_descriptor || ec == asio::error::connection_reset;
}

inline bool has_connection_field(const Response& response) {
  return std::any_of(response.begin(), response.end(),
                     [](const auto& field) { return field.name() == beast_http::field::connection; });
}

// Whether the request asks for 100 Continue (its first Expect field, as Beast reads it).
inline bool expects_continue(const RequestParts& request) {
  for (const FieldView& field : request.fields) {
    if (field.id == beast_http::field::expect) return beast::iequals(field.value, "100-continue");
  }
  return false;
}

// The request's traceparent when it has exactly one, and a valid one; else empty.
inline std::string single_valid_traceparent(const RequestParts& request) {
  std::string_view value;
  int lines = 0;
  for (const FieldView& field : request.fields) {
    if (beast::iequals(field.name, "traceparent")) {
      value = field.value;
      ++lines;
    }
  }
  return lines == 1 && core::is_valid_traceparent(value) ? std::string(value) : std::string();
}

// What the head offers to switch to (core/upgrade_decision.hpp), read only when an Upgrade field
// came: most requests pay one pass over the field ids.
inline core::UpgradeDecision decide_upgrade(const RequestParts& request, const RoutedRequest& routed) {
  std::string upgrade;
  for (const FieldView& field : request.fields) {
    if (field.id != beast_http::field::upgrade) continue;
    if (!upgrade.empty()) upgrade += ", ";
    upgrade.append(field.value);
  }
  if (upgrade.empty()) return {};
  const std::string connection = wire::connection_list(request.fields);
  return core::decide_upgrade({.upgrade = upgrade, .connection = connection, .version = request.version},
                              routed.route != nullptr ? &routed.route->policy : nullptr, routed.key_header_sent,
                              routed.handling);
}

// What the proxy refuses of a request's head, decided in one place, in the order the checks must
// run (the parser's own errors, the limits, RFC 9112's framing rules, the target), as the Beast
// examples build every error answer in one function. `head` and `normalized` are filled on the
// way: the validator's view of the fields, the target the upstream will see.
struct HeadRefusal {
  std::optional<core::Problem> problem;  // set: answered, then the connection closes
  unsigned version = 11;                 // of the answer
  bool client_gone = false;              // the client left or a deadline passed: nothing to answer
};

inline HeadRefusal refusal_of_head(const beast::error_code& header_ec, const ClientRequest& request,
                                   const beast::flat_buffer& buffer, const ClientLimits& limits,
                                   std::size_t largest_request_body, core::RequestHead& head,
                                   core::TargetResult& normalized) {
  HeadRefusal refusal;
  if (header_ec == beast_http::error::body_limit) {
    // A Content-Length above every route's limit is refused as soon as the header says so (one
    // within some route's is checked against its own once the request is routed).
    refusal.problem = core::request_too_large_problem(largest_request_body);
    refusal.version = request.parts().version;
    return refusal;
  }
  if (header_ec == beast_http::error::header_limit) {
    refusal.problem =
        request_line_exceeds(request, buffer, limits.max_request_line)
            ? core::request_line_too_long_problem(limits.max_request_line)
            : core::headers_too_large_problem("the request line and headers exceed limits.max_header_bytes");
    return refusal;
  }
  if (header_ec) {
    if (is_connection_gone(header_ec)) {
      refusal.client_gone = true;
    } else {
      refusal.problem = core::bad_request_problem("malformed HTTP request: " + header_ec.message());
    }
    return refusal;
  }
  refusal.version = request.parts().version;
  if (request_line_exceeds(request, buffer, limits.max_request_line)) {
    refusal.problem = core::request_line_too_long_problem(limits.max_request_line);
    return refusal;
  }
  if (request.parts().fields.size() > limits.max_headers) {
    refusal.problem = core::headers_too_large_problem("the request has more than limits.max_headers (" +
                                                      std::to_string(limits.max_headers) + ") header fields");
    return refusal;
  }
  // What RFC 9112 says to refuse in a head the parser accepted (request_framing.hpp): before
  // anything reads the body, routes or forwards, so client and upstream never disagree on
  // where this request ends or which host it is for.
  head.method = request.parts().method_string;
  head.version = refusal.version;
  head.fields.clear();
  for (const FieldView& field : request.parts().fields) head.fields.emplace_back(field.name, field.value);
  if (std::optional<core::Problem> problem = core::request_framing_problem(head)) {
    refusal.problem = std::move(problem);
    return refusal;
  }
  // Routes are matched on the target the upstream will see, and that is what is forwarded.
  normalized = core::normalize_request_target(request.parts().target, request.parts().method_string);
  refusal.problem = std::move(normalized.problem);
  return refusal;
}

// What the proxy refuses of a body read whole: past the limit, or malformed (a chunk size that
// does not parse or overflows, a bad chunk extension or trailer); nullopt when the client left.
inline std::optional<core::Problem> refusal_of_body(const beast::error_code& body_ec, std::size_t max_request_body) {
  if (body_ec == beast_http::error::body_limit) return core::request_too_large_problem(max_request_body);
  if (is_connection_gone(body_ec) || body_ec == beast_http::error::partial_message) return std::nullopt;
  return core::bad_request_problem("malformed request body: " + body_ec.message());
}

// The HTTP/1.1 keep-alive loop, over either stream.
template <class Stream>
asio::awaitable<void> serve_http(Stream& stream, ClientConnection& connection, WorkerServices& services,
                                 const bool& draining, const std::string& address) {
  // Bounded: Beast takes a chunk's size line and the trailers whole and does not bound them, so
  // a request read whole (guarded) could otherwise grow the buffer without end; the bound comes
  // from the limits when the connection opens.
  beast::flat_buffer buffer(services.config->options.limits.max_header_bytes + wire::kMaxChunkFraming);
  std::string response_head;  // reused by every response on this connection
  ClientRequest request;      // each request in turn, its buffers' capacity reused
  core::RequestHead head;     // the validator's view of each request, its field list's storage reused
  if constexpr (!kIsTls<Stream>) {
    // The idle read below must never block the thread: a readiness that went stale reads nothing.
    boost::system::error_code ignored;
    stream.non_blocking(true, ignored);
  }
  for (;;) {
    // Limits come from the configuration snapshot current when each request starts.
    const ClientLimits limits = services.config->options.limits;
    if (buffer.size() == 0) {
      // Idle keep-alive: wait for the first byte of the next request.
      connection.deadline.expire_after(limits.idle_timeout);
      if constexpr (kIsTls<Stream>) {
        // OpenSSL may hold decrypted bytes the socket no longer signals: read through it (its own
        // buffers are released while idle, SSL_MODE_RELEASE_BUFFERS).
        auto [ec, n] = co_await stream.async_read_some(buffer.prepare(kFirstReadSize), use_tuple);
        if (ec) co_return;
        buffer.commit(n);
      } else {
        // An idle connection holds no read buffer (as nginx frees its keep-alive connections'
        // buffers): wait until the socket is readable, then take a buffer and read what came.
        buffer.shrink_to_fit();
        boost::system::error_code read_ec = asio::error::would_block;
        std::size_t n = 0;
        while (read_ec == asio::error::would_block) {
          auto [wait_ec] = co_await stream.async_wait(asio::socket_base::wait_read, use_tuple);
          if (wait_ec) co_return;
          n = stream.read_some(buffer.prepare(kFirstReadSize), read_ec);  // non-blocking (set above)
        }
        if (read_ec) co_return;
        buffer.commit(n);
      }
    }
    connection.in_request = true;

    ClientRequestParser parser(request);
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(services.config->largest_request_body);
    // The header deadline runs from the first byte: a client trickling headers (slowloris) is cut off.
    connection.deadline.expire_after(limits.header_timeout);
    beast::error_code header_ec;
    if (!wire::parse_buffered_header(parser, buffer, header_ec)) {
      auto [read_ec, read_bytes] = co_await beast_http::async_read_header(stream, buffer, parser, use_tuple);
      header_ec = read_ec;
    }
    core::TargetResult normalized;
    HeadRefusal refusal =
        refusal_of_head(header_ec, request, buffer, limits, services.config->largest_request_body, head, normalized);
    if (refusal.client_gone) co_return;
    if (refusal.problem) {
      co_await refuse(stream, connection, std::move(*refusal.problem), refusal.version,
                      services.config->problem_docs_url(), limits.write_timeout, services.metrics);
      co_return;
    }
    const unsigned version = request.parts().version;

    // Logged as received (the target is normalized below), when logged at all.
    const bool access_log = services.config->options.access_log;
    const std::string method = access_log ? std::string(request.parts().method_string) : std::string();
    const std::string target = access_log ? std::string(request.parts().target) : std::string();
    request.set_target(std::move(normalized.normalized->target));
    // absolute-form: the target's authority replaces any Host (RFC 9112 §3.2.2).
    if (normalized.normalized->authority) request.set_host(std::move(*normalized.normalized->authority));
    // Only this layer knows the transport; whatever the client claimed is replaced.
    request.set_field(beast_http::field::unknown, "X-Forwarded-Proto", kIsTls<Stream> ? "https" : "http");
    const bool client_keep_alive = keeps_connection_open(request.parts());
    RequestTrace trace;
    // Only the access log reads it. Two traceparent fields make neither valid (W3C Trace Context §3.2).
    if (access_log) trace.traceparent = single_valid_traceparent(request.parts());
    const auto request_started = std::chrono::steady_clock::now();
    // The exchange's end: its bodies counted once, its access-log line written.
    const auto finish = [&](unsigned status) {
      services.metrics.record_bodies(trace);
      if (access_log) log_request(method, target, status, trace, request_started);
    };

    // A request no idempotency rule applies to is streamed both ways, decided from its head.
    const std::shared_ptr<const RuntimeConfig> config = services.config;
    const RoutedRequest routed = route_request(*config, request.parts());
    // The route's own body limit: a Content-Length past it is refused before a byte is read; a
    // chunked body is counted against it as it comes.
    if (parser.content_length().value_or(0) > routed.terms.max_request_body) {
      co_await refuse(stream, connection, core::request_too_large_problem(routed.terms.max_request_body), version,
                      config->problem_docs_url(), limits.write_timeout, services.metrics);
      co_return;
    }
    parser.body_limit(routed.terms.max_request_body);
    const core::UpgradeDecision upgrade = decide_upgrade(request.parts(), routed);
    if (upgrade.action == core::UpgradeAction::refuse) {
      co_await refuse(stream, connection, *upgrade.refusal, version, config->problem_docs_url(), limits.write_timeout,
                      services.metrics);
      co_return;
    }
    // Asked for only once nothing above refuses the request: a client told to go on sends a body
    // that a refusal would leave unread.
    if (version >= 11 && expects_continue(request.parts())) {
      connection.deadline.expire_after(limits.write_timeout);
      auto [ec, n] = co_await asio::async_write(stream, asio::buffer(kContinue), use_tuple);
      if (ec) co_return;
    }

    if (routed.handling == core::BodyHandling::streamed) {
      if (routed.route != nullptr) trace.route = routed.route->policy.name;
      connection.deadline.expire_never();
      streaming::StreamedOutcome outcome = co_await streaming::forward_streamed(
          stream, connection, request, parser, buffer, services, *config, routed.route, address,
          client_keep_alive && !draining, upgrade.protocols, response_head, trace, [&](unsigned status) {
            trace.handled = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                                  request_started);
            services.metrics.record(trace, status);
          });
      trace.bodies = outcome.bodies;
      if (outcome.refused) {
        co_await refuse(stream, connection, std::move(*outcome.problem), version, config->problem_docs_url(),
                        limits.write_timeout, services.metrics);
        co_return;
      }
      if (outcome.problem) {
        trace.handled =
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - request_started);
        const auto status = static_cast<unsigned>(outcome.problem->status);
        services.metrics.record(trace, status);
        const bool serves_on = co_await answer_problem(
            stream, connection, *outcome.problem, version, config->problem_docs_url(), client_keep_alive && !draining,
            outcome.request_read, limits.write_timeout, response_head, trace.bodies);
        finish(status);
        if (!serves_on) co_return;
        continue;
      }
      connection.in_request = false;
      finish(outcome.status);
      if (!outcome.keep_alive) co_return;
      continue;
    }

    connection.deadline.expire_after(limits.body_timeout);
    beast::error_code body_ec;
    std::size_t parsed = 0;
    if (!wire::parse_buffered(parser, buffer, body_ec, parsed)) {
      // Bound to names, not assigned through std::tie: GCC 12 mishandles temporaries in co_await.
      auto [read_ec, read_bytes] = co_await beast_http::async_read(stream, buffer, parser, use_tuple);
      body_ec = read_ec;
    }
    if (body_ec) {
      if (std::optional<core::Problem> problem = refusal_of_body(body_ec, routed.terms.max_request_body)) {
        co_await refuse(stream, connection, std::move(*problem), version, config->problem_docs_url(),
                        limits.write_timeout, services.metrics);
      }
      co_return;
    }

    // While the request is handled nothing is read from the client: its going away must not
    // cancel the upstream call or the store write (the handler's own deadlines bound them).
    connection.deadline.expire_never();
    const auto handling_started = std::chrono::steady_clock::now();
    std::unique_ptr<OpenResponse> rest;  // set: an answer past what its route keeps, to stream
    Response response = co_await handle_request(services, routed, request.parts(), address, trace, rest);
    trace.handled =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - handling_started);
    services.metrics.record(trace, response.result_int());
    trace.bodies.in = request.parts().body.size();

    const bool keep_alive = client_keep_alive && !draining;
    if (rest) {
      // An answer past what its route keeps: its head and first bytes, the rest streamed.
      const streaming::AnswerInFlight in_flight{
          .head = response,
          .kept_body = response.body(),
          .parser = *rest->parser,
          .lease = rest->lease,
          .upstream_framing = {.has_length = rest->parser->content_length().has_value(),
                               .chunked = rest->parser->chunked(),
                               .transfer_codings = rest->transfer_codings},
          .reusable = rest->reusable,
          .guarded = true};
      const bool head_request = request.parts().method == beast_http::verb::head;
      streaming::StreamedOutcome outcome;
      {
        const ActiveStream active(services.metrics);
        outcome = co_await streaming::relay_answer(stream, connection, in_flight, version, head_request, keep_alive,
                                                   routed.terms.stream_idle_timeout, limits.write_timeout,
                                                   response_head, [](unsigned) {});
      }
      trace.bodies.out = outcome.bodies.out;
      trace.bodies.aborted = outcome.bodies.aborted;
      if (outcome.problem) {
        const bool serves_on =
            co_await answer_problem(stream, connection, *outcome.problem, version, config->problem_docs_url(),
                                    keep_alive, true, limits.write_timeout, response_head, trace.bodies);
        finish(static_cast<unsigned>(outcome.problem->status));
        if (!serves_on) co_return;
        continue;
      }
      connection.in_request = false;
      finish(response.result_int());
      if (!outcome.keep_alive) co_return;
      continue;
    }
    // An HTTP/1.1 response stays open without a Connection field: Beast's keep_alive(true), which
    // parses the field's tokens, is needed only when one came through.
    if (!keep_alive || response.version() < 11 || has_connection_field(response)) response.keep_alive(keep_alive);
    // An answer held whole goes in one write: its bytes are known, and its line is out before a
    // client could read it (lines keep the order in which clients got their answers).
    trace.bodies.out = response.body().size();
    finish(response.result_int());
    connection.deadline.expire_after(limits.write_timeout);
    auto [write_ec, written] = co_await write_response(stream, response, response_head);
    connection.in_request = false;
    if (write_ec || !keep_alive) co_return;
  }
}

}  // namespace idem::http::session_loop
