#include "support/tls_client.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace idem::test {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

constexpr std::uint64_t kMaxResponseBody = 512ULL * 1024 * 1024;
constexpr std::uint32_t kMaxResponseHeader = 1024 * 1024;
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

int openssl_version(TlsProtocol protocol) {
  switch (protocol) {
    case TlsProtocol::v1_1: return TLS1_1_VERSION;
    case TlsProtocol::v1_2: return TLS1_2_VERSION;
    case TlsProtocol::v1_3: return TLS1_3_VERSION;
  }
  return 0;
}

struct X509Free {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct BignumFree {
  void operator()(BIGNUM* number) const { BN_free(number); }
};
struct OpensslFree {
  void operator()(char* text) const { OPENSSL_free(text); }
};

// Starts one asynchronous operation and runs the io_context until it completes or the deadline
// passes; then the socket is closed, which completes the operation, reported as timed_out.
template <class Start>
beast::error_code run_with_deadline(net::io_context& io, tcp::socket& socket, std::chrono::milliseconds timeout,
                                    Start start) {
  std::optional<beast::error_code> result;
  start([&result](beast::error_code ec) { result = ec; });
  io.restart();
  io.run_for(timeout);
  if (result) return *result;
  beast::error_code ignored;
  socket.close(ignored);
  io.restart();
  io.run();
  return net::error::timed_out;
}

http::request<http::string_body> to_beast(const HttpRequest& request, std::uint16_t port) {
  const auto has = [&](std::string_view name) {
    return std::any_of(request.headers.begin(), request.headers.end(),
                       [&](const auto& header) { return beast::iequals(header.first, name); });
  };
  http::request<http::string_body> message;
  message.version(11);
  message.method_string(request.method);
  message.target(request.target);
  for (const auto& [name, value] : request.headers) message.insert(name, value);
  if (!has("Host")) message.set(http::field::host, "localhost:" + std::to_string(port));
  message.body() = request.body;
  if (!has("Content-Length") && !has("Transfer-Encoding") &&
      (!request.body.empty() || request.method == "POST" || request.method == "PUT" || request.method == "PATCH")) {
    message.content_length(request.body.size());
  }
  return message;
}

HttpResponse failure(std::string_view step, const std::string& why) {
  HttpResponse response;
  response.error = std::string(step) + ": " + why;
  return response;
}

void describe_peer(SSL* ssl, TlsHandshake& handshake) {
  handshake.protocol = SSL_get_version(ssl);
  const unsigned char* alpn = nullptr;
  unsigned int alpn_length = 0;
  SSL_get0_alpn_selected(ssl, &alpn, &alpn_length);
  if (alpn != nullptr) handshake.alpn.assign(reinterpret_cast<const char*>(alpn), alpn_length);
  const std::unique_ptr<X509, X509Free> certificate{SSL_get1_peer_certificate(ssl)};
  if (!certificate) return;
  if (const std::unique_ptr<BIO, BioFree> bio{BIO_new(BIO_s_mem())}) {
    X509_NAME_print_ex(bio.get(), X509_get_subject_name(certificate.get()), 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    if (size > 0) handshake.peer_subject.assign(data, static_cast<std::size_t>(size));
  }
  const std::unique_ptr<BIGNUM, BignumFree> serial{ASN1_INTEGER_to_BN(X509_get0_serialNumber(certificate.get()), nullptr)};
  if (serial) {
    if (const std::unique_ptr<char, OpensslFree> hex{BN_bn2hex(serial.get())}) handshake.peer_serial = hex.get();
  }
}

}  // namespace

struct TlsConnection::Impl {
  Impl(std::uint16_t port_, TlsClientOptions options_)
      : port(port_), options(std::move(options_)), context(ssl::context::tls_client) {}

  // Configures the context and the connection's SSL; "" or what went wrong.
  std::string configure() {
    SSL_CTX* native = context.native_handle();
    if (options.max_protocol == TlsProtocol::v1_1) {
      // OpenSSL 3 offers TLS 1.1 and older only at security level 0: an outdated client must ask.
      SSL_CTX_set_security_level(native, 0);
      SSL_CTX_set_cipher_list(native, "DEFAULT:@SECLEVEL=0");
    }
    if (options.min_protocol) SSL_CTX_set_min_proto_version(native, openssl_version(*options.min_protocol));
    if (options.max_protocol) SSL_CTX_set_max_proto_version(native, openssl_version(*options.max_protocol));
    if (options.max_protocol == TlsProtocol::v1_1 && !options.min_protocol) {
      SSL_CTX_set_min_proto_version(native, TLS1_VERSION);
    }
    beast::error_code ec;
    if (!options.ca_file.empty()) {
      context.load_verify_file(options.ca_file.string(), ec);
      if (ec) return "ca_file: " + ec.message();
      context.set_verify_mode(ssl::verify_peer, ec);
    } else {
      context.set_verify_mode(ssl::verify_none, ec);
    }
    if (!options.cert_file.empty()) {
      context.use_certificate_chain_file(options.cert_file.string(), ec);
      if (ec) return "cert_file: " + ec.message();
      context.use_private_key_file(options.key_file.string(), ssl::context::pem, ec);
      if (ec) return "key_file: " + ec.message();
    }
    // Made once the context is complete: an SSL copies the context's settings when created.
    stream.emplace(io, context);
    SSL* connection = stream->native_handle();
    beast::error_code address_ec;
    net::ip::make_address(options.server_name, address_ec);
    const bool ip_literal = !address_ec;
    if (!ip_literal && !options.server_name.empty()) SSL_set_tlsext_host_name(connection, options.server_name.c_str());
    if (!options.ca_file.empty() && !options.server_name.empty()) {
      if (ip_literal) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(connection), options.server_name.c_str());
      } else {
        SSL_set1_host(connection, options.server_name.c_str());
      }
    }
    if (options.offer_alpn) SSL_set_alpn_protos(connection, kAlpnHttp11, sizeof kAlpnHttp11);
    return {};
  }

  void connect() {
    connected = true;
    if (std::string error = configure(); !error.empty()) {
      handshake.error = "client setup: " + error;
      broken = true;
      return;
    }
    tcp::socket& socket = stream->next_layer();
    const tcp::endpoint endpoint(net::ip::address_v4::loopback(), port);
    auto ec = run_with_deadline(io, socket, options.timeout, [&](auto done) { socket.async_connect(endpoint, done); });
    if (ec) {
      handshake.error = "connect: " + ec.message();
      broken = true;
      return;
    }
    ec = run_with_deadline(io, socket, options.timeout,
                           [&](auto done) { stream->async_handshake(ssl::stream_base::client, done); });
    if (ec) {
      const long verify = SSL_get_verify_result(stream->native_handle());
      handshake.error = !options.ca_file.empty() && verify != X509_V_OK
                            ? std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify)
                            : ec.message();
      broken = true;
      return;
    }
    describe_peer(stream->native_handle(), handshake);
  }

  HttpResponse exchange(const HttpRequest& request) {
    if (!connected) connect();
    if (!handshake.ok()) return failure("handshake", handshake.error);
    if (broken) return failure("send", "connection closed");
    tcp::socket& socket = stream->next_layer();
    auto message = to_beast(request, port);
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBody);
    parser.header_limit(kMaxResponseHeader);
    if (request.method == "HEAD") parser.skip(true);
    auto ec = run_with_deadline(io, socket, options.timeout, [&](auto done) {
      http::async_write(*stream, message, [done](beast::error_code write_ec, std::size_t) { done(write_ec); });
    });
    if (ec) {
      close();
      return failure("write", ec.message());
    }
    ec = run_with_deadline(io, socket, options.timeout, [&](auto done) {
      http::async_read(*stream, buffer, parser, [done](beast::error_code read_ec, std::size_t) { done(read_ec); });
    });
    if (ec) {
      close();
      return failure("read", ec.message());
    }
    auto received = parser.release();
    HttpResponse response;
    response.status = static_cast<int>(received.result_int());
    for (const auto& field : received) response.headers.emplace(field.name_string(), field.value());
    response.keep_alive = received.keep_alive();
    response.body = std::move(received.body());
    if (!response.keep_alive) close();
    return response;
  }

  void close() {
    if (broken || !stream) return;
    broken = true;
    tcp::socket& socket = stream->next_layer();
    // A bounded close_notify exchange, then the socket goes.
    run_with_deadline(io, socket, std::chrono::milliseconds(500), [&](auto done) { stream->async_shutdown(done); });
    beast::error_code ignored;
    socket.close(ignored);
  }

  std::uint16_t port;
  TlsClientOptions options;
  net::io_context io{1};
  ssl::context context;
  std::optional<ssl::stream<tcp::socket>> stream;  // made by configure()
  beast::flat_buffer buffer;
  TlsHandshake handshake;
  bool connected = false;
  bool broken = false;
};

TlsConnection::TlsConnection(std::uint16_t port, TlsClientOptions options)
    : impl_(std::make_unique<Impl>(port, std::move(options))) {}

TlsConnection::~TlsConnection() {
  if (impl_->connected) impl_->close();
}

const TlsHandshake& TlsConnection::handshake() {
  if (!impl_->connected) impl_->connect();
  return impl_->handshake;
}

HttpResponse TlsConnection::send(const HttpRequest& request) { return impl_->exchange(request); }

bool TlsConnection::is_open() const { return impl_->connected && !impl_->broken; }

TlsHandshake tls_handshake(std::uint16_t port, const TlsClientOptions& options) {
  TlsConnection connection(port, options);
  return connection.handshake();
}

HttpResponse tls_send(std::uint16_t port, const HttpRequest& request, const TlsClientOptions& options) {
  TlsConnection connection(port, options);
  return connection.send(request);
}

}  // namespace idem::test
