#pragma once
// Private to config: the TLS client block both binaries read (idemproxy's upstream.tls,
// idemrelay's sink.http.tls) and the PEM paths it names, checked at load so `--check` catches
// a typo'd or unreadable file.
#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config::detail {

// A path the process can open for reading: a regular file (OpenSSL reads it later; a FIFO or a
// device would block it or never end). Problems are reported at the value.
std::optional<std::string> readable_file(YamlReader& yaml, const Field& field, std::string_view path);

// `path` is where the block sits ("upstream.tls"): messages name its keys under it.
void read_client_tls(YamlReader& yaml, const Field& field, std::string_view path, UpstreamTlsConfig& tls);

}  // namespace idem::config::detail
