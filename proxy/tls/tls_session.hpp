#pragma once
// Per-connection TLS details: naming the upstream on a new connection (SNI and the name its
// certificate must carry), and turning a failed handshake into the reason an operator can act on.
#include <openssl/ssl.h>

#include <boost/system/error_code.hpp>
#include <string>

namespace idem::tls {

// Sends `name` as SNI (unless it is an IP literal, which SNI may not carry) and, when verifying,
// requires the peer's certificate to be issued for it (a DNS name, or an IP address SAN for an
// IP literal). False when OpenSSL refuses the name.
bool set_upstream_peer_name(SSL* ssl, const std::string& name, bool verify);

// Why an upstream handshake failed: "certificate verify failed: <X509 reason>" when the chain or
// the name did not verify (e.g. "hostname mismatch", "unable to get local issuer certificate"),
// else the TLS error itself (an alert from the peer, a protocol version refused, a timeout).
std::string upstream_handshake_failure(SSL* ssl, const boost::system::error_code& ec, bool verify);

// True for an alert a TLS peer sends only while it is still completing the handshake (it refused
// our certificate or our parameters). With TLS 1.3 a server checks the client's certificate after
// the client considers the handshake done, so this alert arrives in place of the first response:
// the server's application never saw the request.
bool is_handshake_rejection(const boost::system::error_code& ec);

// Readable text for a TLS-layer error (OpenSSL's reason, without the library name).
std::string tls_error_text(const boost::system::error_code& ec);

}  // namespace idem::tls
