#pragma once
// idemproxy's configuration as plain structs (the file's shape), loaded from YAML by
// config/config_loader.hpp. See config/idemproxy.example.yaml for every option with its default.
// Read by app/ only: it translates these into the options each runtime module declares.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/admin_section.hpp"
#include "config/postgres_section.hpp"
#include "config/redis_section.hpp"
#include "core/exchange_timing.hpp"
#include "core/route.hpp"
#include "http/client_limits.hpp"
#include "tls/tls_options.hpp"

namespace idem::config {

// `listen:` one address, or a list of at most one host:port and one unix:/path.
struct ListenConfig {
  bool tcp = true;  // false: a list with only a unix socket
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::string unix_socket;  // unix:/path given: the proxy listens there too (http/unix_listener.hpp)
  bool operator==(const ListenConfig&) const = default;
};

// TLS on the client listener (top-level `tls:`; tls/tls_options.hpp): read at start-up and again on
// every reload (SIGHUP, a change of the config file or of these files), so a renewed certificate
// is picked up without a restart; connections already open keep the old one.
using TlsVersion = tls::TlsVersion;
using ListenerTlsConfig = tls::ListenerTlsOptions;

// `limits:` (http/client_limits.hpp: the client session applies exactly these).
using LimitsConfig = http::ClientLimits;

// TLS to the upstream, on when upstream.url is https:// (tls/tls_options.hpp).
using UpstreamTlsConfig = tls::UpstreamTlsOptions;

// One upstream: `upstream:` declares the only one (named "default"), `upstreams:` several by name;
// a route names the one its requests go to (the first when it names none).
struct UpstreamConfig {
  std::string name = "default";
  std::string url = "http://127.0.0.1:3000";
  std::string host = "127.0.0.1";  // parsed from url
  std::uint16_t port = 3000;       // parsed from url
  std::string socket_path;         // url unix:/path: the upstream listens there (host and port unused)
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
// for_each_restart_only (config.cpp), which restart_only_changes and keep_restart_only
// (config_loader.hpp) read.
struct Config {
  std::string source_path;  // file the config came from ("" when loaded from text)
  ListenConfig listen;      // restart-only
  ListenerTlsConfig tls;    // reloaded, files included (see ListenerTlsConfig)
  unsigned workers = 0;     // restart-only. io threads; 0 = one per core
  // Unset in the file: one whole exchange (core::default_drain_timeout of the timing model; 37s
  // with the default upstream and store timeouts).
  std::chrono::milliseconds drain_timeout{37'000};
  LimitsConfig limits;
  // restart-only. Never empty: the one of `upstream:`, or those of `upstreams:` in file order.
  std::vector<UpstreamConfig> upstreams{UpstreamConfig{}};
  StoreConfig store;               // restart-only
  ReaperConfig reaper;             // restart-only
  ReplayCacheConfig replay_cache;  // restart-only
  LogConfig log;
  ProblemsConfig problems;
  AdminConfig admin;  // restart-only (idemproxy: /healthz, /readyz, /metrics, /admin/keys/...)
  std::vector<core::Route> routes;
};

// The timeouts that bound one exchange of `route` (core/exchange_timing.hpp): its upstream's
// and its own, and the store's.
core::ExchangeTimeouts exchange_timeouts(const core::Route& route, const std::vector<UpstreamConfig>& upstreams,
                                         const PostgresConfig& postgres);
// The same for a request no route claims, to `upstream`.
core::ExchangeTimeouts exchange_timeouts(const UpstreamConfig& upstream, const PostgresConfig& postgres);
// The budget of the longest exchange any request can make: over every route and every upstream.
// drain_timeout must cover it.
core::ExchangeBudget longest_exchange_of(const Config& config);
// The longest time any request may wait for its answer's head: over every upstream and route.
std::chrono::milliseconds longest_upstream_timeout(const Config& config);
// "37s = 2 × store.postgres.query_timeout 2s + ... + upstream.timeout 30s[ + margin 1s]".
std::string describe_budget(const core::ExchangeBudget& budget, bool with_margin);
// A duration as the messages above spell it ("24h", "90s", "250ms").
std::string describe_duration(std::chrono::milliseconds value);

}  // namespace idem::config
