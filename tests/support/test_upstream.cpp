// idem-test-upstream: the service the end-to-end tests and the demo put behind idemproxy.
//
// It counts every request it executes (in total, per received Idempotency-Key value and per
// webhook-id) and misbehaves on request through X-Test-* headers (status, delay, hang, reset,
// chunking, extra headers, sized or echoed bodies), so a test can drive every row of the
// behaviour table and then ask how many times the upstream really ran:
//   GET /__count                  -> {"total": n}
//   GET /__count?key=K            -> {"count": n}   K = Idempotency-Key value exactly as received
//   GET /__count?webhook_id=K     -> {"count": n}
//   GET /__tls                    -> {"connections": n}   TLS handshakes completed
//   POST /__reset                 -> zeroes every counter
// Control requests are not counted. One io thread: the counters need no lock.
//
// Optionally it also serves HTTPS on a second port, with the same counters and behaviour (so a
// test can count over plain HTTP what arrived over TLS); with --tls-client-ca it requires a client
// certificate issued by that CA, and its JSON body then names the certificate's subject
// ("client_cert_subject").
//
// Usage: idem-test-upstream --listen 127.0.0.1:PORT   (PORT 0 = ephemeral)
//          [--tls-listen 127.0.0.1:PORT --tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
// Prints "tls 127.0.0.1:<port>" (with TLS), then "listening 127.0.0.1:<port>" once bound;
// SIGTERM/SIGINT exit 0.
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "support/upstream_protocol.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace json = boost::json;
using tcp = net::ip::tcp;
namespace ssl = net::ssl;
namespace proto = idem::test::upstream;
using TlsStream = ssl::stream<beast::tcp_stream>;

constexpr std::uint64_t kMaxRequestBody = 64ULL * 1024 * 1024;
constexpr std::uint32_t kMaxRequestHeader = 64 * 1024;
constexpr std::size_t kResponseChunks = 4;

struct Counters {
  std::uint64_t total = 0;
  std::uint64_t tls_connections = 0;  // completed TLS handshakes
  std::unordered_map<std::string, std::uint64_t> by_key;
  std::unordered_map<std::string, std::uint64_t> by_webhook_id;

  void reset() {
    total = 0;
    tls_connections = 0;
    by_key.clear();
    by_webhook_id.clear();
  }
};

// What the X-Test-* headers of one request ask for.
struct Instructions {
  unsigned status = 200;
  std::chrono::milliseconds delay{0};
  bool hang = false;
  bool reset = false;
  bool chunked = false;
  bool echo = false;
  bool echo_headers = false;
  std::optional<std::size_t> body_size;
  std::vector<std::pair<std::string, std::string>> extra_headers;
  std::string interim;  // the raw bytes of the interim responses to send before the final one
  std::vector<std::pair<std::string, std::string>> trailers;  // after the last chunk
};

// "HTTP/1.1 103 Early Hints\r\n..." for each status of an X-Test-Interim list; nullopt when the
// list is not 1xx statuses.
std::optional<std::string> interim_responses(std::string_view list) {
  std::string bytes;
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    unsigned status = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), status);
    if (ec != std::errc{} || ptr != item.data() + item.size() || status < 100 || status > 199) return std::nullopt;
    bytes += "HTTP/1.1 " + std::to_string(status) + " Interim\r\n";
    if (status == 103) bytes += "Link: </style.css>; rel=preload; as=style\r\n";
    if (status == 101) bytes += "Upgrade: test-protocol\r\nConnection: upgrade\r\n";
    bytes += "\r\n";
  }
  return bytes;
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) return std::nullopt;
  return value;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Reads the instructions; on a malformed X-Test-* header returns the reason instead.
std::pair<Instructions, std::string> read_instructions(const http::request<http::string_body>& request) {
  Instructions out;
  for (const auto& field : request) {
    const std::string_view name = field.name_string();
    const std::string_view value = trim(field.value());
    const auto is = [&](std::string_view expected) { return beast::iequals(name, expected); };
    if (is(proto::kStatusHeader)) {
      const auto status = parse_unsigned(value);
      if (!status || *status < 200 || *status > 599) return {out, "X-Test-Status must be 200..599"};
      out.status = static_cast<unsigned>(*status);
    } else if (is(proto::kDelayHeader)) {
      const auto delay = parse_unsigned(value);
      if (!delay || *delay > 600'000) return {out, "X-Test-Delay-Ms must be 0..600000"};
      out.delay = std::chrono::milliseconds(*delay);
    } else if (is(proto::kBodySizeHeader)) {
      const auto size = parse_unsigned(value);
      if (!size || *size > kMaxRequestBody) return {out, "X-Test-Body-Size must be 0..64MiB"};
      out.body_size = static_cast<std::size_t>(*size);
    } else if (is(proto::kAddHeaderHeader)) {
      const auto colon = value.find(':');
      if (colon == std::string_view::npos || colon == 0) return {out, "X-Test-Header must be 'Name: value'"};
      out.extra_headers.emplace_back(std::string(trim(value.substr(0, colon))),
                                     std::string(trim(value.substr(colon + 1))));
    } else if (is(proto::kTrailerHeader)) {
      const auto colon = value.find(':');
      if (colon == std::string_view::npos || colon == 0) return {out, "X-Test-Trailer must be 'Name: value'"};
      out.trailers.emplace_back(std::string(trim(value.substr(0, colon))), std::string(trim(value.substr(colon + 1))));
    } else if (is(proto::kHangHeader)) {
      out.hang = value == "1";
    } else if (is(proto::kResetHeader)) {
      out.reset = value == "1";
    } else if (is(proto::kChunkedHeader)) {
      out.chunked = value == "1";
    } else if (is(proto::kEchoHeader)) {
      out.echo = value == "1";
    } else if (is(proto::kEchoHeadersHeader)) {
      out.echo_headers = value == "1";
    } else if (is(proto::kInterimHeader)) {
      auto interim = interim_responses(value);
      if (!interim) return {out, "X-Test-Interim must list 1xx statuses, e.g. 100,103"};
      out.interim = std::move(*interim);
    }
  }
  return {out, ""};
}

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0x0f]);
  }
  return hex;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    unsigned value = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
    if (ec != std::errc{} || ptr != text.data() + i + 3) return std::nullopt;
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

json::value header_or_null(const http::request<http::string_body>& request, std::string_view name) {
  const auto it = request.find(name);
  if (it == request.end()) return nullptr;
  return json::string(it->value());
}

bool status_has_no_body(unsigned status) { return status == 204 || status == 304; }

// The subject of the client certificate a TLS peer presented, RFC 2253 form; "" when none.
std::string peer_subject(SSL* ssl) {
  struct X509Free {
    void operator()(X509* certificate) const { X509_free(certificate); }
  };
  struct BioFree {
    void operator()(BIO* bio) const { BIO_free(bio); }
  };
  const std::unique_ptr<X509, X509Free> certificate{SSL_get1_peer_certificate(ssl)};
  if (!certificate) return "";
  const std::unique_ptr<BIO, BioFree> bio{BIO_new(BIO_s_mem())};
  if (!bio) return "";
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(certificate.get()), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return size > 0 ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

// One connection, over plain TCP (beast::tcp_stream) or TLS (TlsStream): the same behaviour.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  Session(tcp::socket socket, Counters& counters)
    requires(!kTls)
      : stream_(std::move(socket)), timer_(stream_.get_executor()), counters_(counters) {}
  Session(tcp::socket socket, ssl::context& context, Counters& counters)
    requires(kTls)
      : stream_(std::move(socket), context), timer_(stream_.get_executor()), counters_(counters) {}

  void start() {
    if constexpr (kTls) {
      beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(10));
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) {
          std::cerr << "idem-test-upstream: TLS handshake failed: " << ec.message() << '\n';
          return self->close();
        }
        beast::get_lowest_layer(self->stream_).expires_never();
        ++self->counters_.tls_connections;
        self->client_subject_ = peer_subject(self->stream_.native_handle());
        self->read_request();
      });
    } else {
      read_request();
    }
  }

 private:
  void read_request() {
    parser_.emplace();
    parser_->body_limit(kMaxRequestBody);
    parser_->header_limit(kMaxRequestHeader);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      close();  // client closed, or sent something unparsable: nothing to answer
      return;
    }
    request_ = parser_->release();
    const std::string_view target = request_.target();
    if (target.starts_with("/__")) {
      send(control_response());
      return;
    }
    execute();
  }

  http::response<http::string_body> control_response() {
    const std::string_view target = request_.target();
    const auto question = target.find('?');
    const std::string_view path = target.substr(0, question);
    const std::string_view query = question == std::string_view::npos ? "" : target.substr(question + 1);
    if (path == "/__reset" && request_.method() == http::verb::post) {
      counters_.reset();
      return json_response(http::status::ok, json::object{{"reset", true}});
    }
    if (path == "/__tls" && request_.method() == http::verb::get) {
      return json_response(http::status::ok, json::object{{"connections", counters_.tls_connections}});
    }
    if (path == "/__count" && request_.method() == http::verb::get) {
      if (query.empty()) return json_response(http::status::ok, json::object{{"total", counters_.total}});
      const auto equals = query.find('=');
      const std::string_view name = query.substr(0, equals);
      const auto value = percent_decode(equals == std::string_view::npos ? "" : query.substr(equals + 1));
      if (!value) return json_response(http::status::bad_request, json::object{{"error", "bad percent-encoding"}});
      const auto count_in = [&](const std::unordered_map<std::string, std::uint64_t>& map) {
        const auto it = map.find(*value);
        return json_response(http::status::ok, json::object{{"count", it == map.end() ? 0 : it->second}});
      };
      if (name == "key") return count_in(counters_.by_key);
      if (name == "webhook_id") return count_in(counters_.by_webhook_id);
      return json_response(http::status::bad_request, json::object{{"error", "use ?key= or ?webhook_id="}});
    }
    return json_response(http::status::not_found, json::object{{"error", "unknown control endpoint"}});
  }

  http::response<http::string_body> json_response(http::status status, const json::value& body) const {
    http::response<http::string_body> response{status, request_.version()};
    response.set(http::field::content_type, "application/json");
    response.body() = json::serialize(body);
    return response;
  }

  void execute() {
    execution_ = ++counters_.total;
    if (const auto key = request_.find("Idempotency-Key"); key != request_.end())
      ++counters_.by_key[std::string(key->value())];
    if (const auto id = request_.find("webhook-id"); id != request_.end())
      ++counters_.by_webhook_id[std::string(id->value())];

    auto [instructions, error] = read_instructions(request_);
    if (!error.empty()) {
      auto response = json_response(http::status::bad_request, json::object{{"error", error}});
      send(std::move(response));
      return;
    }
    instructions_ = std::move(instructions);
    if (instructions_.reset) {
      close();
      return;
    }
    if (instructions_.hang) {
      wait_for_client_close();
      return;
    }
    if (instructions_.delay.count() == 0) {
      respond();
      return;
    }
    timer_.expires_after(instructions_.delay);
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) self->respond();
    });
  }

  void respond() {
    http::response<http::string_body> response{static_cast<http::status>(instructions_.status), request_.version()};
    if (instructions_.echo) {
      if (const auto type = request_.find(http::field::content_type); type != request_.end())
        response.set(http::field::content_type, type->value());
      response.body() = request_.body();
    } else if (instructions_.body_size) {
      response.set(http::field::content_type, "application/octet-stream");
      response.body() = proto::pattern_body(*instructions_.body_size);
    } else {
      response.set(http::field::content_type, "application/json");
      response.body() = json::serialize(execution_summary());
    }
    response.set(proto::kExecutionHeader, std::to_string(execution_));
    for (const auto& [name, value] : instructions_.extra_headers) response.insert(name, value);

    if (instructions_.chunked && request_.method() != http::verb::head && !status_has_no_body(instructions_.status)) {
      send_chunked(std::move(response));
      return;
    }
    send(std::move(response));
  }

  json::object execution_summary() const {
    json::object summary{
        {"execution", execution_},
        {"method", std::string(request_.method_string())},
        {"target", std::string(request_.target())},
        {"key", header_or_null(request_, "Idempotency-Key")},
        {"webhook_id", header_or_null(request_, "webhook-id")},
        {"body_sha256", sha256_hex(request_.body())},
        {"x_forwarded_for", header_or_null(request_, "X-Forwarded-For")},
        {"x_forwarded_proto", header_or_null(request_, "X-Forwarded-Proto")},
    };
    if constexpr (kTls) {
      summary["client_cert_subject"] = client_subject_.empty() ? json::value(nullptr) : json::value(client_subject_);
    }
    if (instructions_.echo_headers) {
      json::array headers;
      for (const auto& field : request_)
        headers.push_back(json::array{std::string(field.name_string()), std::string(field.value())});
      summary["headers"] = std::move(headers);
    }
    return summary;
  }

  void send(http::response<http::string_body> response) {
    response.keep_alive(request_.keep_alive());
    if (status_has_no_body(response.result_int())) {
      response.body().clear();
    } else if (request_.method() == http::verb::head) {
      response.content_length(response.body().size());
      response.body().clear();
    } else {
      response.prepare_payload();
    }
    response_ = std::move(response);
    if (!instructions_.interim.empty()) {
      net::async_write(stream_, net::buffer(instructions_.interim), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) return self->close();
        self->instructions_.interim.clear();
        self->send(std::move(self->response_));
      });
      return;
    }
    http::async_write(stream_, response_,
                      [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->after_response(ec); });
  }

  // Header first, then the body in kResponseChunks chunks, each its own write.
  void send_chunked(http::response<http::string_body> response) {
    chunked_head_ = http::response<http::empty_body>{response.result(), response.version()};
    for (const auto& field : response) chunked_head_.insert(field.name_string(), field.value());
    chunked_head_.keep_alive(request_.keep_alive());
    chunked_head_.chunked(true);
    chunked_body_ = std::move(response.body());
    chunk_offset_ = 0;
    head_serializer_.emplace(chunked_head_);
    http::async_write_header(stream_, *head_serializer_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->write_next_chunk();
    });
  }

  void write_next_chunk() {
    if (chunk_offset_ >= chunked_body_.size()) {
      trailer_ = {};
      for (const auto& [name, value] : instructions_.trailers) trailer_.insert(name, value);
      net::async_write(stream_, http::make_chunk_last(trailer_), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        self->after_response(ec);
      });
      return;
    }
    const std::size_t chunk_size = std::max<std::size_t>(1, (chunked_body_.size() + kResponseChunks - 1) / kResponseChunks);
    const std::size_t size = std::min(chunk_size, chunked_body_.size() - chunk_offset_);
    const auto chunk = net::buffer(chunked_body_.data() + chunk_offset_, size);
    chunk_offset_ += size;
    net::async_write(stream_, http::make_chunk(chunk), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->write_next_chunk();
    });
  }

  void after_response(beast::error_code ec) {
    if (ec || !request_.keep_alive()) {
      close();
      return;
    }
    read_request();
  }

  // X-Test-Hang: read and discard until the client goes away, never answering.
  void wait_for_client_close() {
    stream_.async_read_some(net::buffer(discard_), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->wait_for_client_close();
    });
  }

  void close() {
    beast::error_code ignored;
    auto& socket = beast::get_lowest_layer(stream_).socket();
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  Stream stream_;
  std::string client_subject_;
  beast::flat_buffer buffer_;
  net::steady_timer timer_;
  Counters& counters_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  Instructions instructions_;
  std::uint64_t execution_ = 0;
  http::response<http::string_body> response_;
  http::response<http::empty_body> chunked_head_;
  http::fields trailer_;
  std::optional<http::response_serializer<http::empty_body>> head_serializer_;
  std::string chunked_body_;
  std::size_t chunk_offset_ = 0;
  std::array<char, 4096> discard_{};
};

tcp::acceptor bind_acceptor(net::io_context& io, const tcp::endpoint& endpoint) {
  tcp::acceptor acceptor(io);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  return acceptor;
}

struct TlsOptions {
  tcp::endpoint endpoint;
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // empty: no client certificate asked for
};

// Throws on unreadable or mismatched files: the process then exits 1 with the reason.
ssl::context make_server_context(const TlsOptions& options) {
  ssl::context context(ssl::context::tls_server);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
  context.use_certificate_chain_file(options.cert_file);
  context.use_private_key_file(options.key_file, ssl::context::pem);
  if (!options.client_ca_file.empty()) {
    context.load_verify_file(options.client_ca_file);
    context.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    static constexpr unsigned char kSessionContext[] = "idem-test-upstream";
    SSL_CTX_set_session_id_context(context.native_handle(), kSessionContext, sizeof kSessionContext - 1);
  }
  return context;
}

class Server {
 public:
  Server(net::io_context& io, const tcp::endpoint& endpoint, const std::optional<TlsOptions>& tls)
      : acceptor_(bind_acceptor(io, endpoint)) {
    if (tls) {
      tls_context_.emplace(make_server_context(*tls));
      tls_acceptor_.emplace(bind_acceptor(io, tls->endpoint));
    }
  }

  tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
  std::optional<tcp::endpoint> tls_endpoint() const {
    if (!tls_acceptor_) return std::nullopt;
    return tls_acceptor_->local_endpoint();
  }

  void accept() {
    accept_on(acceptor_, [this](tcp::socket socket) {
      std::make_shared<Session<beast::tcp_stream>>(std::move(socket), counters_)->start();
    });
    if (tls_acceptor_) {
      accept_on(*tls_acceptor_, [this](tcp::socket socket) {
        std::make_shared<Session<TlsStream>>(std::move(socket), *tls_context_, counters_)->start();
      });
    }
  }

 private:
  template <class StartSession>
  void accept_on(tcp::acceptor& acceptor, StartSession start) {
    acceptor.async_accept([this, &acceptor, start](beast::error_code ec, tcp::socket socket) {
      if (!ec) {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        start(std::move(socket));
      } else if (ec == net::error::operation_aborted) {
        return;
      } else {
        std::cerr << "idem-test-upstream: accept: " << ec.message() << '\n';
      }
      accept_on(acceptor, start);
    });
  }

  tcp::acceptor acceptor_;
  std::optional<tcp::acceptor> tls_acceptor_;
  std::optional<ssl::context> tls_context_;
  Counters counters_;
};

std::optional<tcp::endpoint> parse_listen(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = parse_unsigned(text.substr(colon + 1));
  if (!port || *port > 65535) return std::nullopt;
  beast::error_code ec;
  const auto address = net::ip::make_address(std::string(text.substr(0, colon)), ec);
  if (ec) return std::nullopt;
  return tcp::endpoint(address, static_cast<std::uint16_t>(*port));
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<tcp::endpoint> endpoint;
  std::optional<tcp::endpoint> tls_endpoint;
  TlsOptions tls;
  bool usable = true;
  for (int i = 1; i < argc && usable; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--listen" && has_value) {
      endpoint = parse_listen(argv[++i]);
      usable = endpoint.has_value();
    } else if (arg == "--tls-listen" && has_value) {
      tls_endpoint = parse_listen(argv[++i]);
      usable = tls_endpoint.has_value();
    } else if (arg == "--tls-cert" && has_value) {
      tls.cert_file = argv[++i];
    } else if (arg == "--tls-key" && has_value) {
      tls.key_file = argv[++i];
    } else if (arg == "--tls-client-ca" && has_value) {
      tls.client_ca_file = argv[++i];
    } else {
      usable = false;
    }
  }
  const bool tls_files = !tls.cert_file.empty() && !tls.key_file.empty();
  if (!usable || !endpoint || tls_endpoint.has_value() != tls_files) {
    std::cerr << "usage: idem-test-upstream --listen HOST:PORT   (PORT 0 = ephemeral)\n"
                 "         [--tls-listen HOST:PORT --tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]\n";
    return 2;
  }
  std::optional<TlsOptions> tls_options;
  if (tls_endpoint) {
    tls.endpoint = *tls_endpoint;
    tls_options = tls;
  }
  try {
    net::io_context io{1};
    Server server(io, *endpoint, tls_options);
    net::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&io](beast::error_code, int) { io.stop(); });
    server.accept();
    if (const auto tls_bound = server.tls_endpoint()) {
      std::cout << "tls " << tls_bound->address().to_string() << ':' << tls_bound->port() << std::endl;
    }
    const auto bound = server.local_endpoint();
    std::cout << "listening " << bound.address().to_string() << ':' << bound.port() << std::endl;
    io.run();
  } catch (const std::exception& e) {
    std::cerr << "idem-test-upstream: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
