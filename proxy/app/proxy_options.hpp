#pragma once
// idemproxy's parsed configuration (config/) translated into the options each runtime module
// declares for itself: the one place that knows both shapes. Pure, no I/O.
#include <cstddef>

#include "cache/redis_replay_cache.hpp"
#include "config/config.hpp"
#include "http/proxy_options.hpp"
#include "log/log.hpp"
#include "pg/pool_options.hpp"
#include "store/reaper.hpp"

namespace idem::app {

log::Level log_level(config::LogLevel level);

// One pool's options from store.postgres, for every pool the proxy opens (the workers' slices and
// the admin listener's one connection), `size` connections.
pg::PoolOptions store_pool_options(const config::PostgresConfig& postgres, std::size_t size);

store::ReaperOptions reaper_options(const config::ReaperConfig& reaper);

// What the client sessions read on every request (listen, limits, access log, routes, each
// upstream's timeout, problems.docs_url).
http::ProxyOptions proxy_options(const config::Config& config);
// One upstream's pool.
http::UpstreamOptions upstream_options(const config::UpstreamConfig& upstream);

// store.redis; call only when it is enabled().
cache::RedisCacheOptions redis_cache_options(const config::RedisCacheConfig& redis);

}  // namespace idem::app
