#pragma once
// Private to config: the TLS client block both binaries read (idemproxy's upstream.tls,
// idemrelay's sink.http.tls); the PEM paths it names are checked at load (file_fields.hpp).
#include <string_view>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config::detail {

// `path` is where the block sits ("upstream.tls"): messages name its keys under it.
void read_client_tls(YamlReader& yaml, const Field& field, std::string_view path, UpstreamTlsConfig& tls);

}  // namespace idem::config::detail
