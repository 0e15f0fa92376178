#pragma once
// What the tls module is given: plain values, the PEM files it reads, nothing of YAML. config/ parses
// the listener's `tls:` and the client blocks (idemproxy's upstream.tls, idemrelay's sink.http.tls)
// straight into these (one definition: config/config.hpp names them ListenerTlsConfig and
// UpstreamTlsConfig).
#include <string>

namespace idem::tls {

enum class TlsVersion { v1_2, v1_3 };

// TLS on the client listener; off unless cert_file is set. The files are read each time a context
// is built (start-up and every reload), so a renewed certificate at the same path is picked up.
struct ListenerTlsOptions {
  std::string cert_file;  // PEM: the certificate, then its chain
  std::string key_file;   // PEM private key
  TlsVersion min_version = TlsVersion::v1_2;
  bool enabled() const { return !cert_file.empty(); }
  bool operator==(const ListenerTlsOptions&) const = default;
};

// TLS towards a server (idemproxy's upstream, idemrelay's webhook consumer), on for an https:// url.
// load_upstream_tls reads verify and the files; the caller sends server_name (or the url's host)
// as SNI and verifies the certificate against it (tls_session.hpp).
struct UpstreamTlsOptions {
  bool enabled = false;     // set from the url's scheme
  bool verify = true;       // verify the certificate chain and the name; off only for tests
  std::string ca_file;      // PEM bundle to trust; empty: the system's trust store
  std::string server_name;  // SNI and the name verified; empty: the url's host
  std::string cert_file;    // client certificate (mutual TLS), optional; key_file with it
  std::string key_file;
  bool operator==(const UpstreamTlsOptions&) const = default;
};

}  // namespace idem::tls
