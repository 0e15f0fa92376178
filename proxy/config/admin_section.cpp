#include "config/admin_section.hpp"

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "config/addresses.hpp"
#include "config/file_fields.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config::detail {
namespace {

const std::vector<std::string_view> kAdminKeys = {"listen", "token", "token_file"};
constexpr std::size_t kMaxTokenFileBytes = 4096;

}  // namespace

void read_admin(YamlReader& yaml, const Field& field, AdminConfig& admin) {
  IssueSink& issues = yaml.issues();
  const std::optional<Fields> fields = yaml.mapping(field.value, field.key.Mark(), "admin", kAdminKeys);
  if (!fields) return;
  // The binary's default port makes the example in the message (9090 for idemproxy, 9465 for idemrelay).
  const std::uint16_t default_port = admin.port;
  if (const Field* f = fields->find("listen")) {
    if (const std::optional<std::string> text = yaml.string(*f, "admin.listen")) {
      if (*text == "off") {
        admin.enabled = false;
      } else {
        // Port 0 (a free port, for tests and side-by-side runs) is allowed here, unlike `listen`.
        const bool any_port = text->ends_with(":0");
        const std::optional<HostPort> address =
            parse_host_port(any_port ? text->substr(0, text->size() - 1) + "1" : *text);
        if (!address) {
          issues.error(f->value.Mark(), "bad admin.listen address " + quoted(*text) +
                                            " (expected host:port, e.g. 127.0.0.1:" + std::to_string(default_port) +
                                            ", or off)");
        } else {
          admin.enabled = true;
          admin.host = address->host;
          admin.port = any_port ? 0 : address->port;
        }
      }
    }
  }
  const Field* token = fields->find("token");
  const Field* token_file = fields->find("token_file");
  if (token != nullptr && token_file != nullptr) {
    issues.error(token_file->key.Mark(), "admin: give token or token_file, not both");
  } else if (token != nullptr) {
    assign(yaml.string(*token, "admin.token"), admin.token);
  } else if (token_file != nullptr) {
    if (std::optional<SecretFile> file = read_secret_file(yaml, *token_file, "admin.token_file", kMaxTokenFileBytes)) {
      if (file->text.empty()) {
        issues.error(token_file->value.Mark(), "admin.token_file " + quoted(file->path) + " is missing or empty");
      } else {
        admin.token = std::move(file->text);
      }
    }
  }
}

}  // namespace idem::config::detail
