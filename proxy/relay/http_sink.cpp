#include "relay/http_sink.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include "core/stored_headers.hpp"
#include "wire/client_stream.hpp"
#include "wire/http_head.hpp"
#include "tls/tls_context.hpp"
#include "tls/tls_session.hpp"
#include "log/log.hpp"
#include "relay/message_template.hpp"

namespace idem::relay {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
constexpr std::size_t kMaxResponseBody = 1024 * 1024;  // the consumer's answer is read and dropped

WebhookSigner signer_or_throw(const std::vector<std::string>& secrets) {
  auto signer = WebhookSigner::from_secrets(secrets);
  if (!signer)
    throw std::runtime_error("sink.http: the webhook secret is not \"whsec_\" + base64 of at least 16 bytes");
  return std::move(*signer);
}

asio::ip::tcp::endpoint resolve_or_throw(asio::io_context& io, const std::string& host, std::uint16_t port) {
  boost::system::error_code error;
  const asio::ip::address address = asio::ip::make_address(host, error);
  if (!error) return {address, port};
  asio::ip::tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), error);
  if (error || results.empty()) throw std::runtime_error("sink.http: cannot resolve " + host + ": " + error.message());
  return results.begin()->endpoint();
}

std::shared_ptr<asio::ssl::context> tls_or_throw(const idem::tls::UpstreamTlsOptions& tls) {
  if (!tls.enabled) return nullptr;
  idem::tls::UpstreamTlsResult loaded = idem::tls::load_upstream_tls(tls);
  if (!loaded.context) throw std::runtime_error("sink.http.tls: " + loaded.error);
  return std::move(loaded.context);
}

std::int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct HttpSink::Stream : idem::wire::ClientStream {
  using ClientStream::ClientStream;
};

struct HttpSink::Batch {
  std::shared_ptr<const std::vector<OutboxRow>> rows;
  std::vector<std::vector<std::size_t>> lanes;  // per aggregate, its rows' indexes in id order
  std::size_t next_lane = 0;
  std::size_t workers = 0;
  std::vector<Delivery> deliveries;
  PublishHandler handler;
  std::chrono::steady_clock::time_point deadline;  // start no request that could end after it
};

HttpSink::HttpSink(asio::io_context& io, HttpSinkOptions options)
    : io_(io),
      options_(std::move(options)),
      signer_(signer_or_throw(options_.secrets)),
      endpoint_(resolve_or_throw(io, options_.host, options_.port)),
      tls_(tls_or_throw(options_.tls)) {}

HttpSink::~HttpSink() = default;

void HttpSink::start() {}

void HttpSink::stop() {
  stopped_ = true;
  for (auto& stream : idle_) stream->close();
  idle_.clear();
}

std::string HttpSink::body_for(const OutboxRow& row) {
  std::string body = "{\"type\":";
  log::append_json_string(body, row.event_type);
  body += ",\"timestamp\":";
  log::append_json_string(body, row.created_at);
  body += ",\"data\":";
  body += row.payload;  // JSON already (jsonb text)
  body += ",\"event_id\":";
  log::append_json_string(body, std::to_string(row.id));
  body += ",\"aggregate_type\":";
  log::append_json_string(body, row.aggregate_type);
  body += ",\"aggregate_id\":";
  log::append_json_string(body, row.aggregate_id);
  body += ",\"headers\":";
  body += row.headers;
  body += "}";
  return body;
}

DeliveryOutcome HttpSink::outcome_of_status(unsigned status) {
  if (status >= 200 && status < 300) return DeliveryOutcome::delivered;
  switch (status) {
    case 408:  // request timeout
    case 409:  // conflict: an earlier delivery of this event is still running at the consumer's inbox
    case 429:  // too many requests
      return DeliveryOutcome::retry;
    default: break;
  }
  if (status >= 400 && status < 500) return DeliveryOutcome::poison;
  return DeliveryOutcome::retry;
}

void HttpSink::publish(std::shared_ptr<const std::vector<OutboxRow>> rows,
                       std::chrono::steady_clock::time_point deadline, PublishHandler handler) {
  auto batch = std::make_shared<Batch>();
  batch->deadline = deadline;
  batch->rows = std::move(rows);
  batch->handler = std::move(handler);
  batch->deliveries.assign(batch->rows->size(), Delivery{DeliveryOutcome::unavailable, "not attempted"});
  std::map<std::pair<std::string_view, std::string_view>, std::size_t> lane_of;
  for (std::size_t i = 0; i < batch->rows->size(); ++i) {
    const OutboxRow& row = (*batch->rows)[i];
    const auto key = std::make_pair(std::string_view(row.aggregate_type), std::string_view(row.aggregate_id));
    auto [it, inserted] = lane_of.try_emplace(key, batch->lanes.size());
    if (inserted) batch->lanes.emplace_back();
    batch->lanes[it->second].push_back(i);
  }
  if (stopped_ || batch->lanes.empty()) {
    asio::post(io_, [batch] { batch->handler(std::move(batch->deliveries)); });
    return;
  }
  batch->workers = std::min(batch->lanes.size(), options_.max_connections);
  for (std::size_t i = 0; i < batch->workers; ++i) {
    asio::co_spawn(io_, run_lanes(batch), asio::detached);
  }
}

asio::awaitable<void> HttpSink::run_lanes(std::shared_ptr<Batch> batch) {
  const auto self = shared_from_this();
  while (batch->next_lane < batch->lanes.size()) {
    const std::vector<std::size_t>& lane = batch->lanes[batch->next_lane++];
    for (std::size_t position = 0; position < lane.size(); ++position) {
      // An aggregate's rows go one by one: a slow endpoint must not run the batch past its lease.
      // (No co_await inside ?: here: GCC 12 miscompiles it.)
      Delivery delivery{DeliveryOutcome::held, "the batch's lease is nearly over"};
      if (std::chrono::steady_clock::now() + options_.timeout <= batch->deadline) {
        delivery = co_await deliver((*batch->rows)[lane[position]]);
      }
      const bool through = delivery.outcome == DeliveryOutcome::delivered;
      batch->deliveries[lane[position]] = std::move(delivery);
      if (through) continue;
      for (std::size_t rest = position + 1; rest < lane.size(); ++rest) {
        batch->deliveries[lane[rest]] = {DeliveryOutcome::held, "an earlier row of the aggregate did not go through"};
      }
      break;
    }
  }
  if (--batch->workers == 0) batch->handler(std::move(batch->deliveries));
}

asio::awaitable<std::unique_ptr<HttpSink::Stream>> HttpSink::open_stream(bool reuse, bool& fresh, std::string& error) {
  // A pooled connection the consumer closed while it sat idle is dropped here, not written to.
  while (reuse && !idle_.empty()) {
    std::unique_ptr<Stream> stream = std::move(idle_.back());
    idle_.pop_back();
    if (stream->ready_for_next_request()) {
      fresh = false;
      co_return stream;
    }
    stream->close();
  }
  fresh = true;
  auto stream = std::make_unique<Stream>(io_, tls_.get());
  stream->expire_after(options_.connect_timeout);
  // A named local, not a braced temporary: GCC 12 mishandles temporaries inside co_await.
  const std::vector<wire::Endpoint> endpoints{wire::Endpoint(endpoint_)};
  if (const auto ec = co_await stream->connect(endpoints)) {
    error = "connect to " + options_.host + ":" + std::to_string(options_.port) + ": " + ec.message();
    co_return nullptr;
  }
  boost::system::error_code ignored;
  stream->socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  // The handshake gets a connect timeout of its own.
  if (const auto failure = co_await stream->handshake(tls_name(), options_.tls.verify, options_.connect_timeout)) {
    error = "TLS to " + tls_name() + ": " + *failure;
    co_return nullptr;
  }
  co_return stream;
}

void HttpSink::keep_idle(std::unique_ptr<Stream> stream) {
  // No deadline while idle: the next delivery sets its own. (Left armed, it closed the connection
  // `timeout` after the last delivery began, and the next delivery on it failed as a timeout,
  // charged to a row the consumer never failed.)
  stream->expire_never();
  idle_.push_back(std::move(stream));
}

asio::awaitable<Delivery> HttpSink::deliver(const OutboxRow& row) {
  const std::string id = std::to_string(row.id);
  const std::string body = body_for(row);
  const std::string target = render(options_.target, row, TemplateEscaping::url_segment);
  // One deadline for the response, whichever connection carries the request.
  std::optional<std::chrono::steady_clock::time_point> response_deadline;
  // A reused keep-alive connection can die between the look at it and the write (the consumer
  // closing it at its keep-alive timeout): a failure on it before any response byte is the
  // connection's, not the consumer's answer. The event goes out again at once on a fresh
  // connection and is not charged (as nginx and Go's http.Transport re-send a request whose reused
  // connection closed before any response byte; a webhook may arrive twice anyway, and the
  // consumer deduplicates on webhook-id). Any failure on a fresh connection is the consumer's.
  for (bool reuse = true;; reuse = false) {
    if (stopped_) co_return Delivery{DeliveryOutcome::unavailable, "sink stopped"};
    bool fresh = true;
    std::string connect_error;
    std::unique_ptr<Stream> stream = co_await open_stream(reuse, fresh, connect_error);
    if (!stream) {
      ready_ = false;
      co_return Delivery{DeliveryOutcome::unavailable, connect_error};
    }
    ready_ = true;
    const std::int64_t timestamp = unix_seconds_now();
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, options_.host + ":" + std::to_string(options_.port));
    request.set(http::field::user_agent, "idemrelay");
    request.set(http::field::content_type, "application/json");
    request.set("Idempotency-Key", id);
    request.set("webhook-id", id);
    request.set("webhook-timestamp", std::to_string(timestamp));
    request.set("webhook-signature", signer_.sign(id, timestamp, body));
    if (!row.traceparent.empty()) request.set("traceparent", row.traceparent);
    if (!row.tracestate.empty()) request.set("tracestate", row.tracestate);
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();

    if (!response_deadline) response_deadline = std::chrono::steady_clock::now() + options_.timeout;
    stream->expire_at(*response_deadline);
    auto [write_error, written] = co_await stream->write(request);
    boost::beast::flat_buffer buffer;
    std::optional<idem::wire::ClientStream::ResponseParser> parser;
    const idem::wire::ClientStream::ResponseLimits limits{.body_bytes = kMaxResponseBody};
    boost::system::error_code read_error;
    std::size_t received = 0;
    if (!write_error) {
      // Interim 1xx responses are skipped: only a final status settles the row.
      auto [error, read] = co_await stream->read_final_response(buffer, parser, limits);
      read_error = error;
      received = read;
      // TLS 1.3: a server checks our certificate after we consider the handshake done, so its
      // refusal arrives in place of the response. The consumer's application never saw the
      // event: the endpoint is unusable as configured, not the row's fault.
      if (error && fresh && stream->handshake_refused(error, read)) {
        stream->close();
        ready_ = false;
        co_return Delivery{
            DeliveryOutcome::unavailable,
            "TLS to " + tls_name() + ": the consumer rejected the TLS handshake: " + idem::tls::tls_error_text(error)};
      }
    }
    const boost::system::error_code failure = write_error ? write_error : read_error;
    if (failure) {
      stream->close();
      if (!fresh && received == 0 && idem::wire::is_connection_gone(failure)) continue;
      co_return Delivery{DeliveryOutcome::retry, "POST " + target + ": " + failure.message()};
    }
    const auto& response = parser->get();
    // After a 101 the connection is no longer HTTP: never reused.
    // Every Connection line counts (Beast's keep_alive() reads the first only).
    const bool reusable = response.result_int() != 101 &&
                          core::keeps_connection_open(response.version(), idem::wire::connection_list(response));
    if (reusable && !stopped_ && idle_.size() < options_.max_connections) {
      keep_idle(std::move(stream));
    } else {
      stream->close();
    }
    const unsigned status = response.result_int();
    const DeliveryOutcome outcome = outcome_of_status(status);
    if (outcome == DeliveryOutcome::delivered) co_return Delivery{outcome, {}};
    co_return Delivery{outcome, "POST " + target + ": HTTP " + std::to_string(status)};
  }
}

}  // namespace idem::relay
