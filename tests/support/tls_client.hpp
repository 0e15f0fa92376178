#pragma once
// A synchronous HTTPS/1.1 client for tests (the TLS twin of http_client.hpp), with a deadline on
// every step. It reports what the handshake saw (protocol, the server certificate's subject and
// serial, ALPN), so a test can tell which certificate a server is serving, and it can be held to
// old protocol versions to prove a server refuses them.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "support/http_client.hpp"

namespace idem::test {

enum class TlsProtocol { v1_1, v1_2, v1_3 };

struct TlsClientOptions {
  std::filesystem::path ca_file;        // trust anchors; empty: the server is not verified
  std::string server_name = "localhost";  // SNI and the name verified
  std::optional<TlsProtocol> min_protocol;
  std::optional<TlsProtocol> max_protocol;  // e.g. v1_1 to play an outdated client
  std::filesystem::path cert_file;      // client certificate (with key_file), optional
  std::filesystem::path key_file;
  bool offer_alpn = true;               // offer "http/1.1"
  std::chrono::milliseconds timeout = kDefaultHttpTimeout;
};

struct TlsHandshake {
  std::string error;        // empty when the handshake completed (and verified, when asked to)
  std::string protocol;     // "TLSv1.3", ...
  std::string peer_subject; // RFC 2253, e.g. "CN=localhost,O=idemproxy tests"
  std::string peer_serial;  // upper-case hex, as BN_bn2hex prints it
  std::string alpn;         // the protocol the server selected; "" when none
  bool ok() const { return error.empty(); }
};

// Several requests over one TLS connection to 127.0.0.1:port (connected and handshaken on first
// use). After an error or a response that closes the connection, further sends fail.
class TlsConnection {
 public:
  TlsConnection(std::uint16_t port, TlsClientOptions options);
  ~TlsConnection();
  TlsConnection(const TlsConnection&) = delete;
  TlsConnection& operator=(const TlsConnection&) = delete;

  const TlsHandshake& handshake();  // connects if not yet connected
  HttpResponse send(const HttpRequest& request);
  bool is_open() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One handshake on a fresh connection, then the connection is closed.
TlsHandshake tls_handshake(std::uint16_t port, const TlsClientOptions& options);

// One request on a fresh TLS connection.
HttpResponse tls_send(std::uint16_t port, const HttpRequest& request, const TlsClientOptions& options);

}  // namespace idem::test
