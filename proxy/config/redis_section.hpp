#pragma once
// The Redis connection both binaries open: idemproxy's replay cache (`store.redis`), idemrelay's
// stream sink (`sink.redis_streams`). Each section adds its own options to these.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace idem::config {

struct RedisConnectionConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string password;   // AUTH after connecting when set
  unsigned database = 0;  // SELECT after connecting when not 0
  std::chrono::milliseconds connect_timeout{2'000};
  bool operator==(const RedisConnectionConfig&) const = default;
};

namespace detail {
class YamlReader;
class Fields;

// The connection's options among the section's `fields` (whose keys the caller has checked):
// address (host:port), password, database, connect_timeout. `path` is where the section sits.
void read_redis_connection(YamlReader& yaml, const Fields& fields, std::string_view path, RedisConnectionConfig& redis);
}  // namespace detail

}  // namespace idem::config
