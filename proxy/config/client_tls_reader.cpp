#include "config/client_tls_reader.hpp"

#include <vector>

#include "config/file_fields.hpp"

namespace idem::config::detail {
namespace {

const std::vector<std::string_view> kClientTlsKeys = {"verify", "ca_file", "server_name", "cert_file", "key_file"};

}  // namespace

void read_client_tls(YamlReader& yaml, const Field& field, std::string_view path, UpstreamTlsConfig& tls) {
  const std::optional<Fields> fields = yaml.mapping(field.value, field.key.Mark(), path, kClientTlsKeys);
  if (!fields) return;
  if (const Field* f = fields->find("verify")) {
    if (const auto verify = yaml.boolean(*f, join_path(path, "verify"))) tls.verify = *verify;
  }
  if (const Field* f = fields->find("ca_file")) {
    if (auto file = readable_file(yaml, *f, join_path(path, "ca_file"))) tls.ca_file = std::move(*file);
  }
  if (const Field* f = fields->find("server_name")) {
    if (auto name = yaml.string(*f, join_path(path, "server_name"))) tls.server_name = std::move(*name);
  }
  const Field* cert = fields->find("cert_file");
  const Field* key = fields->find("key_file");
  if ((cert == nullptr) != (key == nullptr)) {
    yaml.issues().error((cert ? cert : key)->key.Mark(),
                        std::string(path) + ": a client certificate needs both cert_file and key_file");
    return;
  }
  if (cert) {
    if (auto file = readable_file(yaml, *cert, join_path(path, "cert_file"))) tls.cert_file = std::move(*file);
    if (auto file = readable_file(yaml, *key, join_path(path, "key_file"))) tls.key_file = std::move(*file);
  }
}

}  // namespace idem::config::detail
