#pragma once
// The `admin:` section both binaries read: the admin listener (probes, /metrics, and idemproxy's
// /admin/*) and the bearer token it requires.
#include <cstdint>
#include <string>

namespace idem::config {

struct AdminConfig {
  bool enabled = true;  // `listen: off` disables it; a listen address enables it
  std::string host = "127.0.0.1";
  std::uint16_t port = 9090;  // 0 picks a free port (logged at start-up)
  std::string token;          // bearer token for /metrics and /admin/*; empty = none
  bool operator==(const AdminConfig&) const = default;
};

namespace detail {
class YamlReader;
struct Field;

// `listen: host:port | host:0 | off`, and `token` or `token_file`. Fields the file leaves out keep
// the values `admin` holds (each binary's defaults).
void read_admin(YamlReader& yaml, const Field& field, AdminConfig& admin);
}  // namespace detail

}  // namespace idem::config
