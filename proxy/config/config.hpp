#pragma once
// idemproxy's configuration as plain structs, loaded from YAML. See config/idemproxy.example.yaml
// for every option with its default.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/admin_section.hpp"
#include "config/postgres_section.hpp"
#include "config/redis_section.hpp"
#include "core/exchange_timing.hpp"
#include "core/route.hpp"

namespace idem::config {

struct ListenConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  bool operator==(const ListenConfig&) const = default;
};

enum class TlsVersion { v1_2, v1_3 };

// TLS on the client listener (top-level `tls:`); off unless cert_file is set. The files are read
// at start-up and again on every reload (SIGHUP, a change of the config file or of these files), so a renewed
// certificate is picked up without a restart; connections already open keep the old one.
struct ListenerTlsConfig {
  std::string cert_file;  // PEM: the certificate, then its chain
  std::string key_file;   // PEM private key
  TlsVersion min_version = TlsVersion::v1_2;
  bool enabled() const { return !cert_file.empty(); }
  bool operator==(const ListenerTlsConfig&) const = default;
};

struct LimitsConfig {
  std::size_t max_request_body = 10 * 1024 * 1024;   // 413 beyond
  std::size_t max_header_bytes = 16 * 1024;          // request line + headers; 431 beyond
  std::size_t max_request_line = 8 * 1024;           // method, target and version; 414 beyond
  std::chrono::milliseconds header_timeout{10'000};  // time to receive a request's headers
  std::chrono::milliseconds body_timeout{30'000};    // time to receive a request's body
  std::chrono::milliseconds idle_timeout{60'000};    // keep-alive idle time before the proxy closes
  std::chrono::milliseconds write_timeout{30'000};   // time to write a response to the client
  std::size_t max_waiting = 1024;        // duplicates waiting (in_flight: wait) per process; beyond, 409 at once
  std::size_t max_headers = 100;         // header fields per request; 431 beyond
  std::size_t max_connections = 10'000;  // client connections per process; beyond, 503 and close
  // An upgraded connection (a WebSocket tunnel) with no byte moving either way for this long is
  // closed (nginx's proxy_read_timeout on an upgraded connection, Envoy's stream idle timeout).
  std::chrono::milliseconds tunnel_idle_timeout{300'000};
};

// TLS to the upstream, on when upstream.url is https://.
struct UpstreamTlsConfig {
  bool enabled = false;     // set from the url's scheme
  bool verify = true;       // verify the certificate chain and the name; off only for tests
  std::string ca_file;      // PEM bundle to trust; empty: the system's trust store
  std::string server_name;  // SNI and the name verified; empty: the url's host
  std::string cert_file;    // client certificate (mutual TLS), optional; key_file with it
  std::string key_file;
  bool operator==(const UpstreamTlsConfig&) const = default;
};

struct UpstreamConfig {
  std::string url = "http://127.0.0.1:3000";
  std::string host = "127.0.0.1";  // parsed from url
  std::uint16_t port = 3000;       // parsed from url
  UpstreamTlsConfig tls;
  std::chrono::milliseconds connect_timeout{1'000};
  std::chrono::milliseconds timeout{30'000};      // request written -> response fully read
  std::size_t max_connections = 256;              // per process, split across workers
  std::chrono::milliseconds idle_timeout{4'000};  // pooled keep-alive connection idle lifetime
  bool operator==(const UpstreamConfig&) const = default;
};

// store.postgres: the connection (query_timeout bounds the claim too) and its pool.
struct PostgresConfig : PostgresConnectionConfig {
  std::size_t pool_size = 8;                         // per process, split across workers
  std::chrono::milliseconds acquire_timeout{1'000};  // wait for a free pooled connection
  // Named prepared statements per connection (parsed and planned once). Turn off behind a
  // transaction-mode pooler that does not track them (PgBouncer before 1.21).
  bool prepared_statements = true;
  bool operator==(const PostgresConfig&) const = default;
};

// Optional Redis replay cache shared by every proxy: completed responses are copied to Redis with
// a TTL of the record's remaining lifetime, and a replay that misses the in-process cache asks
// Redis before Postgres. Only a cache: Redis down or slower than `timeout` means Postgres answers.
struct RedisCacheConfig : RedisConnectionConfig {
  // No host: no Redis cache. A cache that cannot connect quickly is skipped, hence the short timeout.
  RedisCacheConfig()
      : RedisConnectionConfig{.host = "",
                              .port = 6379,
                              .password = "",
                              .database = 0,
                              .connect_timeout = std::chrono::milliseconds(500)} {}
  std::chrono::milliseconds timeout{5};  // deadline per command
  std::string key_prefix = "idemproxy:replay:";
  std::size_t max_value_bytes = 1024 * 1024;  // larger responses are not copied to Redis
  bool enabled() const { return !host.empty(); }
  bool operator==(const RedisCacheConfig&) const = default;
};

// Deletes expired records in small batches. Several proxies may run it at once.
struct ReaperConfig {
  std::chrono::milliseconds interval{30'000};  // 0 disables this process's reaper
  std::size_t batch = 500;                     // rows per statement; batches repeat while full
  bool operator==(const ReaperConfig&) const = default;
};

// In-process cache of finished records (replays without a store round trip).
struct ReplayCacheConfig {
  std::size_t max_bytes = 16 * 1024 * 1024;  // 0 disables it
  bool operator==(const ReplayCacheConfig&) const = default;
};

// One record encryption key. The key bytes are read from the file or the environment variable
// when the config is loaded (a file's or variable's text: 64 hex digits or base64 of 32 bytes).
struct EncryptionKeyConfig {
  std::string id;                      // stored with each record it seals: 1-64 of [A-Za-z0-9._-]
  std::array<std::uint8_t, 32> key{};  // AES-256 key
  std::string source;                  // "file <path>" or "env <VAR>": where it came from, for logs
  bool operator==(const EncryptionKeyConfig&) const = default;
};

// Completed responses encrypted at rest (AES-256-GCM); off unless current_key is set. Records are
// sealed with current_key; every listed key still opens the records it sealed (rotation: add the
// new key, make it current, drop the old one once its records have expired).
struct EncryptionConfig {
  std::string current_key;                // empty: encryption off
  std::vector<EncryptionKeyConfig> keys;  // ids unique; current_key among them
  bool enabled() const { return !current_key.empty(); }
  bool operator==(const EncryptionConfig&) const = default;
};

struct StoreConfig {
  PostgresConfig postgres;
  EncryptionConfig encryption;
  RedisCacheConfig redis;
  bool operator==(const StoreConfig&) const = default;
};

enum class LogLevel { debug, info, warn, error };

struct LogConfig {
  LogLevel level = LogLevel::info;
  bool access = true;  // one JSON line per request (info level)
};

// Where the proxy's problem types are documented: set, every problem's `type` is
// "<docs_url>#<slug>" and 400 and 422 answers link to it (core/problem.hpp). Reloaded.
struct ProblemsConfig {
  std::string docs_url;  // an absolute http(s) URL without a fragment; empty: URN types, no Link
};

// "restart-only": a running process cannot change it (sockets, pools and threads are built from
// it); a reload keeps the running value. Marking a field so means listing it in
// for_each_restart_only (config.cpp), which restart_only_changes and keep_restart_only read.
struct Config {
  std::string source_path;  // file the config came from ("" when loaded from text)
  ListenConfig listen;      // restart-only
  ListenerTlsConfig tls;    // reloaded, files included (see ListenerTlsConfig)
  unsigned workers = 0;     // restart-only. io threads; 0 = one per core
  // Unset in the file: one whole exchange (core::default_drain_timeout of the timing model; 37s
  // with the default upstream and store timeouts).
  std::chrono::milliseconds drain_timeout{37'000};
  LimitsConfig limits;
  UpstreamConfig upstream;         // restart-only
  StoreConfig store;               // restart-only
  ReaperConfig reaper;             // restart-only
  ReplayCacheConfig replay_cache;  // restart-only
  LogConfig log;
  ProblemsConfig problems;
  AdminConfig admin;  // restart-only (idemproxy: /healthz, /readyz, /metrics, /admin/keys/...)
  std::vector<core::Route> routes;
};

// The restart-only settings (marked in Config) that `after` changes from `before`, named as the
// file names them ("store", "reaper"), in Config's order.
std::vector<std::string> restart_only_changes(const Config& before, const Config& after);
// `next` with the restart-only settings of `running` put back: what a reload puts in force.
Config keep_restart_only(Config next, const Config& running);

struct ConfigIssue {
  std::string file;
  int line = 0;    // 1-based; 0 when the issue has no position (e.g. file unreadable)
  int column = 0;  // 1-based
  std::string message;
  bool warning = false;           // warnings do not make the config invalid
  std::string to_string() const;  // "file:line:col: message" (prefixed "warning: " when a warning)
};

struct LoadResult {
  std::optional<Config> config;     // set only when there is no error (warnings allowed)
  std::vector<ConfigIssue> issues;  // every problem found, in file order
};

// Environment lookup for ${VAR} / ${VAR:-default} expansion in scalar values.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup process_environment();

// `running`: on a reload (or `--check --against`), the configuration in force. The sections only
// a restart changes (upstream, store) stay as they run, so the rules between options (a route's
// lease against the upstream's timeout) are checked against the running sections, not the file's;
// and each route whose stored keys the change makes unreachable is warned about
// (key_space_changes.hpp).
LoadResult load_config_file(const std::string& path, const EnvLookup& env = process_environment(),
                            const Config* running = nullptr);
LoadResult load_config_text(std::string_view yaml, std::string_view file_name,
                            const EnvLookup& env = process_environment(), const Config* running = nullptr);

// The timeouts that bound one exchange (core/exchange_timing.hpp), from these two sections.
core::ExchangeTimeouts exchange_timeouts(const UpstreamConfig& upstream, const PostgresConfig& postgres);

// "250ms", "1s", "1.5s", "2m", "24h", "7d" -> milliseconds. nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
// "512", "64KiB", "1MiB", "1GiB", "10MB", "1kB" -> bytes. nullopt when malformed.
std::optional<std::size_t> parse_byte_size(std::string_view text);

}  // namespace idem::config
