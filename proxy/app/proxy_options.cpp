#include "app/proxy_options.hpp"

#include "pg/session_options.hpp"

namespace idem::app {

log::Level log_level(config::LogLevel level) {
  switch (level) {
    case config::LogLevel::debug: return log::Level::debug;
    case config::LogLevel::info: return log::Level::info;
    case config::LogLevel::warn: return log::Level::warn;
    case config::LogLevel::error: return log::Level::error;
  }
  return log::Level::info;
}

// The server cancels a statement a little before the client deadline would orphan it (a statement
// left running holds its snapshot and row locks: see pg/session_options.hpp).
pg::PoolOptions store_pool_options(const config::PostgresConfig& postgres, std::size_t size) {
  pg::PoolOptions pool;
  pool.dsn = pg::with_session_settings(postgres.dsn, postgres.query_timeout * 9 / 10);
  pool.size = size;
  pool.connect_timeout = postgres.connect_timeout;
  pool.query_timeout = postgres.query_timeout;
  pool.acquire_timeout = postgres.acquire_timeout;
  pool.prepared_statements = postgres.prepared_statements;
  return pool;
}

store::ReaperOptions reaper_options(const config::ReaperConfig& reaper) {
  return store::ReaperOptions{.interval = reaper.interval, .batch = reaper.batch};
}

cache::RedisCacheOptions redis_cache_options(const config::RedisCacheConfig& redis) {
  return cache::RedisCacheOptions{
      .host = redis.host,
      .port = redis.port,
      .password = redis.password,
      .database = redis.database,
      .connect_timeout = redis.connect_timeout,
      .timeout = redis.timeout,
      .key_prefix = redis.key_prefix,
      .max_value_bytes = redis.max_value_bytes,
  };
}

http::ProxyOptions proxy_options(const config::Config& config) {
  http::ProxyOptions options{
      .listen = {.tcp = config.listen.tcp, .host = config.listen.host, .port = config.listen.port},
      .limits = config.limits,
      .access_log = config.log.access,
      .upstream_timeouts = {},
      .problem_docs_url = config.problems.docs_url,
      .routes = config.routes,
  };
  for (const config::UpstreamConfig& upstream : config.upstreams) options.upstream_timeouts.push_back(upstream.timeout);
  return options;
}

http::UpstreamOptions upstream_options(const config::UpstreamConfig& upstream) {
  return http::UpstreamOptions{.name = upstream.name,
                               .host = upstream.host,
                               .port = upstream.port,
                               .socket_path = upstream.socket_path,
                               .tls = upstream.tls,
                               .connect_timeout = upstream.connect_timeout,
                               .idle_timeout = upstream.idle_timeout};
}

}  // namespace idem::app
