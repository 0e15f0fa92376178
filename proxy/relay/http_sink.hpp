#pragma once
// POSTs each row to a URL built from a template, as a Standard Webhooks delivery:
//   webhook-id: <event_id>, webhook-timestamp: <unix seconds of this attempt>,
//   webhook-signature: v1,<base64 HMAC-SHA256 over "id.timestamp.body">, Idempotency-Key: <event_id>
// and a JSON body {"type", "timestamp", "data" (the payload), "event_id", "aggregate_type",
// "aggregate_id", "headers"}. An idemproxy in front of the consumer turns the Idempotency-Key into
// an inbox: a re-sent event is answered from the stored response, never executed twice.
//
// 2xx: delivered. 4xx other than 408, 409 and 429: poison (parked at once). Anything else (408,
// 409, 429, 3xx, 5xx, a timeout, a broken connection): retry. 409 is what an idempotency layer in
// front of the consumer (idemproxy's inbox) answers while an earlier delivery of the same event is
// still running there, which is exactly what a redelivery after a lost reply or a timeout runs
// into; a 409 that never clears parks after max_attempts like any other retry. A connection that
// cannot be opened means the endpoint is down: `unavailable` (no attempt counted, the relay backs
// off as a whole). A delivery whose response never came (reset, timeout) may have been executed:
// it is retried with the same webhook-id, and the consumer must deduplicate on it. Connections are
// kept alive between deliveries with no deadline while idle; one the consumer closed meanwhile is
// never charged to a row: it is dropped when picked up, or, when it fails under the request before
// any response byte, the request goes out again at once on a fresh connection.
// An https:// url: TLS 1.2 or later, the consumer's certificate verified (chain and name) against
// the system's or sink.http.tls's CA, an optional client certificate; a handshake or verification
// failure is `unavailable` too, with the reason in the log.
// Order: the rows of one aggregate go one after the other (a failure holds back the rest of the
// aggregate's rows in the batch); different aggregates go in parallel, up to max_connections.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "relay/message_template.hpp"
#include "relay/sink.hpp"
#include "relay/webhook_signature.hpp"
#include "tls/tls_options.hpp"

namespace idem::relay {

// sink.http, as the sink uses it.
struct HttpSinkOptions {
  std::string host;
  std::uint16_t port = 80;
  MessageTemplate target;       // path and query, with placeholders
  tls::UpstreamTlsOptions tls;  // enabled for an https:// url
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds timeout{10'000};  // request written -> response read
  std::size_t max_connections = 8;            // requests in flight at once
  // Standard Webhooks "whsec_<base64>" secrets, each signing every delivery (set_signer replaces them).
  std::vector<std::string> secrets;
};

class HttpSink final : public Sink, public std::enable_shared_from_this<HttpSink> {
 public:
  // Resolves the host now (start-up only; a name blocks). Throws std::runtime_error when the
  // secret or the host is unusable.
  HttpSink(boost::asio::io_context& io, HttpSinkOptions options);
  ~HttpSink() override;

  void start() override;
  void stop() override;
  bool ready() const override { return ready_; }
  std::string_view name() const override { return "http"; }
  void publish(std::shared_ptr<const std::vector<OutboxRow>> rows, std::chrono::steady_clock::time_point deadline,
               PublishHandler handler) override;

  // Signs every delivery attempt from now on with `signer` (new webhook secrets, reloaded). On the
  // io thread only; a request already written keeps the signature it was sent with.
  void set_signer(WebhookSigner signer) { signer_ = std::move(signer); }

  // The request body for a row (tests verify the signature over it).
  static std::string body_for(const OutboxRow& row);
  // What a response status means for the row (see the top of this file).
  static DeliveryOutcome outcome_of_status(unsigned status);

 private:
  struct Batch;
  struct Stream;  // a keep-alive connection: TCP, or TLS over it

  boost::asio::awaitable<void> run_lanes(std::shared_ptr<Batch> batch);
  boost::asio::awaitable<Delivery> deliver(const OutboxRow& row);
  // A pooled connection that still looks alive (when `reuse`), else a new one (`fresh`).
  boost::asio::awaitable<std::unique_ptr<Stream>> open_stream(bool reuse, bool& fresh, std::string& error);
  void keep_idle(std::unique_ptr<Stream> stream);

  // The name sent as SNI and required in the consumer's certificate.
  const std::string& tls_name() const {
    return options_.tls.server_name.empty() ? options_.host : options_.tls.server_name;
  }

  boost::asio::io_context& io_;
  HttpSinkOptions options_;
  WebhookSigner signer_;
  boost::asio::ip::tcp::endpoint endpoint_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // https:// only
  std::vector<std::unique_ptr<Stream>> idle_;       // keep-alive connections between requests
  bool ready_ = true;
  bool stopped_ = false;
};

}  // namespace idem::relay
