#include "tls/tls_session.hpp"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>

namespace idem::tls {
namespace asio = boost::asio;

namespace {

bool is_ip_literal(const std::string& name) {
  boost::system::error_code ec;
  asio::ip::make_address(name, ec);
  return !ec;
}

bool is_openssl_error(const boost::system::error_code& ec) { return ec.category() == asio::error::get_ssl_category(); }

}  // namespace

bool set_upstream_peer_name(SSL* ssl, const std::string& name, bool verify) {
  const bool ip = is_ip_literal(name);
  if (!ip && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) return false;
  if (!verify) return true;
  if (ip) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
  // Wildcards match one whole left-most label only (RFC 6125 §6.4.3).
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set1_host(ssl, name.c_str()) == 1;
}

std::string tls_error_text(const boost::system::error_code& ec) {
  if (is_openssl_error(ec)) {
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    if (reason != nullptr) return reason;
  }
  if (ec == asio::ssl::error::stream_truncated || ec == asio::error::eof) return "the peer closed the connection";
  if (ec == boost::beast::error::timeout) return "timed out";
  return ec.message();
}

std::string upstream_handshake_failure(SSL* ssl, const boost::system::error_code& ec, bool verify) {
  if (verify && ssl != nullptr) {
    const long result = SSL_get_verify_result(ssl);
    if (result != X509_V_OK) return std::string("certificate verify failed: ") + X509_verify_cert_error_string(result);
  }
  return tls_error_text(ec);
}

bool is_handshake_rejection(const boost::system::error_code& ec) {
  if (!is_openssl_error(ec)) return false;
  switch (ERR_GET_REASON(static_cast<unsigned long>(ec.value()))) {
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED: return true;
    default: return false;
  }
}

}  // namespace idem::tls
