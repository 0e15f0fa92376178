#pragma once
// TLS contexts built from the configured PEM files: the listener's (built again on every reload,
// so a certificate renewed at the same path is picked up; connections keep the context they were
// accepted with) and the one the upstream pool connects with. Built at start-up and on reload,
// never on the data path: errors come back as text for the log and `--check`.
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "tls/tls_options.hpp"

namespace idem::tls {

// What a loaded certificate says about itself, for the log lines an operator rotating it reads.
struct CertificateSummary {
  std::string subject;    // one-line RFC 2253 form, e.g. "CN=orders.internal,O=Acme"
  std::string serial;     // hex
  std::string not_after;  // e.g. "Nov 22 01:02:03 2026 GMT"
  bool expired = false;   // not_after has passed (served anyway: refusing would be an outage)
};

// The listener's context and the leaf certificate it serves.
struct ListenerTls {
  explicit ListenerTls(boost::asio::ssl::context built) : context(std::move(built)) {}
  boost::asio::ssl::context context;
  CertificateSummary certificate;
};

struct ListenerTlsResult {
  std::shared_ptr<ListenerTls> tls;  // set on success
  std::string error;                 // otherwise: which file and why, e.g. "tls.key_file /k.pem: ..."
};

// Certificate chain and key from the files (read now), checked to belong together; the minimum
// version from the options; no compression, no renegotiation, the server's cipher order, ALPN
// answered with http/1.1. `tls` must be enabled().
ListenerTlsResult load_listener_tls(const ListenerTlsOptions& tls);

struct UpstreamTlsResult {
  std::shared_ptr<boost::asio::ssl::context> context;  // set on success
  std::string error;
};

// TLS 1.2 or later towards the upstream; peer verification (unless tls.verify is false) against
// tls.ca_file or the system's trust store; the client certificate when configured. The name to
// verify and send as SNI is set per connection (see tls_session.hpp). `tls` must be enabled.
UpstreamTlsResult load_upstream_tls(const UpstreamTlsOptions& tls);

}  // namespace idem::tls
