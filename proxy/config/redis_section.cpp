#include "config/redis_section.hpp"

#include <optional>
#include <string>

#include "config/addresses.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config::detail {

void read_redis_connection(YamlReader& yaml, const Fields& fields, std::string_view path,
                           RedisConnectionConfig& redis) {
  if (const Field* f = fields.find("address")) {
    const std::string address_path = join_path(path, "address");
    if (const auto text = yaml.string(*f, address_path)) {
      if (const auto address = parse_host_port(*text)) {
        redis.host = address->host;
        redis.port = address->port;
      } else {
        yaml.issues().error(f->value.Mark(), "bad address " + quoted(*text) + " for " + address_path +
                                                 " (expected host:port, e.g. 127.0.0.1:6379)");
      }
    }
  }
  if (const Field* f = fields.find("password")) assign(yaml.string(*f, join_path(path, "password")), redis.password);
  if (const Field* f = fields.find("database")) {
    if (const auto n = yaml.integer(*f, join_path(path, "database"), 0, 65'535))
      redis.database = static_cast<unsigned>(*n);
  }
  if (const Field* f = fields.find("connect_timeout")) {
    assign(yaml.duration(*f, join_path(path, "connect_timeout"), false), redis.connect_timeout);
  }
}

}  // namespace idem::config::detail
