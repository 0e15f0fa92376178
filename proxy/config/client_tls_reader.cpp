#include "config/client_tls_reader.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "config/config_file.hpp"

namespace idem::config::detail {
namespace {

const std::vector<std::string_view> kClientTlsKeys = {"verify", "ca_file", "server_name", "cert_file", "key_file"};


std::string under(std::string_view path, std::string_view key) { return std::string(path) + "." + std::string(key); }

}  // namespace

std::optional<std::string> readable_file(YamlReader& yaml, const Field& field, std::string_view path) {
  std::optional<std::string> file = yaml.string(field, path);
  if (!file) return std::nullopt;
  if (file->empty() || ::access(file->c_str(), R_OK) != 0) {
    yaml.issues().error(field.value.Mark(), std::string(path) + ": cannot read " + quoted(*file) + ": " +
                                                (file->empty() ? std::string("empty path") : std::string(std::strerror(errno))));
    return std::nullopt;
  }
  if (!is_regular_file(*file)) {
    yaml.issues().error(field.value.Mark(), std::string(path) + ": cannot read " + quoted(*file) + ": not a regular file");
    return std::nullopt;
  }
  return file;
}

void read_client_tls(YamlReader& yaml, const Field& field, std::string_view path, UpstreamTlsConfig& tls) {
  const std::optional<Fields> fields = yaml.mapping(field.value, field.key.Mark(), path, kClientTlsKeys);
  if (!fields) return;
  if (const Field* f = fields->find("verify")) {
    if (const auto verify = yaml.boolean(*f, under(path, "verify"))) tls.verify = *verify;
  }
  if (const Field* f = fields->find("ca_file")) {
    if (auto file = readable_file(yaml, *f, under(path, "ca_file"))) tls.ca_file = std::move(*file);
  }
  if (const Field* f = fields->find("server_name")) {
    if (auto name = yaml.string(*f, under(path, "server_name"))) tls.server_name = std::move(*name);
  }
  const Field* cert = fields->find("cert_file");
  const Field* key = fields->find("key_file");
  if ((cert == nullptr) != (key == nullptr)) {
    yaml.issues().error((cert ? cert : key)->key.Mark(), std::string(path) + ": a client certificate needs both cert_file and key_file");
    return;
  }
  if (cert) {
    if (auto file = readable_file(yaml, *cert, under(path, "cert_file"))) tls.cert_file = std::move(*file);
    if (auto file = readable_file(yaml, *key, under(path, "key_file"))) tls.key_file = std::move(*file);
  }
}

}  // namespace idem::config::detail
