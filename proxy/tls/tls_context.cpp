#include "tls/tls_context.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509err.h>

#include <boost/asio/ssl/error.hpp>

#include <string_view>

namespace idem::tls {
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

namespace {

// TLS 1.2 suites with forward secrecy and AEAD only (TLS 1.3 suites are all of that already).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// ALPN wire format: length-prefixed protocol names.
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct BignumFree {
  void operator()(BIGNUM* number) const { BN_free(number); }
};
struct OpensslFree {
  void operator()(char* text) const { OPENSSL_free(text); }
};

std::string file_error(std::string_view setting, const std::string& path, std::string_view what,
                       const boost::system::error_code& ec) {
  std::string text(setting);
  text.append(" ").append(path).append(": ").append(what).append(": ").append(ec.message());
  return text;
}

// The reason OpenSSL queued for the call that just failed (the queue is emptied: it is per thread
// and a stale entry would be blamed on the next TLS operation).
std::string take_openssl_reason() {
  const unsigned long code = ERR_peek_last_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? std::string(reason) : std::string("unknown reason");
}

// OpenSSL refuses a key that does not match the certificate loaded before it already while
// loading the key; said in the operator's terms.
std::string key_error(std::string_view key_setting, const std::string& key_file, std::string_view cert_setting,
                      const std::string& cert_file, const boost::system::error_code& ec) {
  const auto code = static_cast<unsigned long>(ec.value());
  if (ec.category() == asio::error::get_ssl_category() && ERR_GET_LIB(code) == ERR_LIB_X509 &&
      ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH) {
    return std::string(key_setting) + " " + key_file + " does not belong to the certificate in " +
           std::string(cert_setting) + " " + cert_file;
  }
  return file_error(key_setting, key_file, "cannot load the private key", ec);
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return size > 0 && data != nullptr ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

CertificateSummary summarize(const X509* certificate) {
  CertificateSummary summary;
  if (certificate == nullptr) return summary;
  if (std::unique_ptr<BIO, BioFree> bio{BIO_new(BIO_s_mem())}) {
    X509_NAME_print_ex(bio.get(), X509_get_subject_name(certificate), 0, XN_FLAG_RFC2253);
    summary.subject = bio_text(bio.get());
  }
  if (std::unique_ptr<BIGNUM, BignumFree> serial{ASN1_INTEGER_to_BN(X509_get0_serialNumber(certificate), nullptr)}) {
    if (std::unique_ptr<char, OpensslFree> hex{BN_bn2hex(serial.get())}) summary.serial = hex.get();
  }
  if (std::unique_ptr<BIO, BioFree> bio{BIO_new(BIO_s_mem())}) {
    ASN1_TIME_print(bio.get(), X509_get0_notAfter(certificate));
    summary.not_after = bio_text(bio.get());
  }
  summary.expired = X509_cmp_current_time(X509_get0_notAfter(certificate)) < 0;
  return summary;
}

// Answers a client's ALPN offer with http/1.1 when it is offered; a client offering only other
// protocols (h2 alone) gets no ALPN answer rather than a failed handshake.
int select_http11(SSL*, const unsigned char** out, unsigned char* out_length, const unsigned char* offered,
                  unsigned int offered_length, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_length, kAlpnHttp11, sizeof kAlpnHttp11, offered, offered_length) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

int openssl_version(TlsVersion version) {
  switch (version) {
    case TlsVersion::v1_2: return TLS1_2_VERSION;
    case TlsVersion::v1_3: return TLS1_3_VERSION;
  }
  return TLS1_2_VERSION;
}

// Settings both directions share: a version floor, no compression (CRIME), no renegotiation.
std::string apply_common_settings(ssl::context& context, int min_version) {
  SSL_CTX* native = context.native_handle();
  if (SSL_CTX_set_min_proto_version(native, min_version) != 1) {
    return "cannot set the minimum TLS version: " + take_openssl_reason();
  }
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) {
    return "cannot set the TLS 1.2 cipher list: " + take_openssl_reason();
  }
  // Idle keep-alive connections give their read and write buffers back.
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  return {};
}

}  // namespace

ListenerTlsResult load_listener_tls(const ListenerTlsOptions& tls) {
  auto result = std::make_shared<ListenerTls>(ssl::context(ssl::context::tls_server));
  ssl::context& context = result->context;
  if (std::string error = apply_common_settings(context, openssl_version(tls.min_version)); !error.empty()) {
    return {nullptr, "tls: " + error};
  }
  SSL_CTX* native = context.native_handle();
  SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_alpn_select_cb(native, select_http11, nullptr);

  boost::system::error_code ec;
  context.use_certificate_chain_file(tls.cert_file, ec);
  if (ec) return {nullptr, file_error("tls.cert_file", tls.cert_file, "cannot load the certificate chain", ec)};
  context.use_private_key_file(tls.key_file, ssl::context::pem, ec);
  if (ec) return {nullptr, key_error("tls.key_file", tls.key_file, "tls.cert_file", tls.cert_file, ec)};
  if (SSL_CTX_check_private_key(native) != 1) {
    return {nullptr, "tls.key_file " + tls.key_file + " does not belong to the certificate in tls.cert_file " +
                         tls.cert_file + " (" + take_openssl_reason() + ")"};
  }
  result->certificate = summarize(SSL_CTX_get0_certificate(native));
  return {std::move(result), {}};
}

UpstreamTlsResult load_upstream_tls(const UpstreamTlsOptions& tls) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  if (std::string error = apply_common_settings(*context, TLS1_2_VERSION); !error.empty()) {
    return {nullptr, "upstream.tls: " + error};
  }
  boost::system::error_code ec;
  if (tls.verify) {
    context->set_verify_mode(ssl::verify_peer, ec);
    if (ec) return {nullptr, "upstream.tls: cannot turn on verification: " + ec.message()};
    if (!tls.ca_file.empty()) {
      context->load_verify_file(tls.ca_file, ec);
      if (ec) return {nullptr, file_error("upstream.tls.ca_file", tls.ca_file, "cannot load the CA certificates", ec)};
    } else {
      context->set_default_verify_paths(ec);
      if (ec) return {nullptr, "upstream.tls: cannot load the system's trust store: " + ec.message()};
    }
  } else {
    context->set_verify_mode(ssl::verify_none, ec);
    if (ec) return {nullptr, "upstream.tls: cannot turn off verification: " + ec.message()};
  }
  if (!tls.cert_file.empty()) {
    context->use_certificate_chain_file(tls.cert_file, ec);
    if (ec) {
      return {nullptr,
              file_error("upstream.tls.cert_file", tls.cert_file, "cannot load the client certificate chain", ec)};
    }
    context->use_private_key_file(tls.key_file, ssl::context::pem, ec);
    if (ec) {
      return {nullptr, key_error("upstream.tls.key_file", tls.key_file, "upstream.tls.cert_file", tls.cert_file, ec)};
    }
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
      return {nullptr, "upstream.tls.key_file " + tls.key_file + " does not belong to the certificate in " +
                           "upstream.tls.cert_file " + tls.cert_file + " (" + take_openssl_reason() + ")"};
    }
  }
  return {std::move(context), {}};
}

}  // namespace idem::tls
