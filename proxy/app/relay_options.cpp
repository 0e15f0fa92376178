#include "app/relay_options.hpp"

#include "pg/session_options.hpp"

namespace idem::app {
namespace {

std::chrono::milliseconds publish_timeout(const config::SinkConfig& sink) {
  switch (sink.kind) {
    case config::SinkKind::redis_streams: return sink.redis.command_timeout;
    case config::SinkKind::http: return sink.http.timeout;
    case config::SinkKind::nats_jetstream: return sink.nats.publish_timeout;
  }
  return sink.http.timeout;
}

}  // namespace

relay::RelayOptions relay_options(const config::RelayConfig& config) {
  const auto& loop = config.relay;
  return relay::RelayOptions{
      .batch_size = loop.batch_size,
      .concurrency = loop.concurrency,
      .poll_interval = loop.poll_interval,
      .lease = loop.lease,
      .publish_timeout = publish_timeout(config.sink),
      .settle_reserve = 2 * config.postgres.query_timeout,
      .query_timeout = config.postgres.query_timeout,
      .max_attempts = loop.max_attempts,
      .backoff_initial = loop.backoff_initial,
      .backoff_max = loop.backoff_max,
      .stats_interval = loop.stats_interval,
  };
}

relay::RetentionOptions retention_options(const config::RetentionConfig& retention) {
  return relay::RetentionOptions{
      .max_age = retention.max_age, .batch = retention.batch, .interval = retention.interval};
}

pg::PoolOptions outbox_pool_options(const config::RelayConfig& config) {
  pg::PoolOptions options;
  // The server cancels a statement a little before our deadline would orphan it (see session_options.hpp).
  options.dsn = pg::with_session_settings(config.postgres.dsn, config.postgres.query_timeout * 9 / 10);
  options.size = config.relay.concurrency + 1;
  options.connect_timeout = config.postgres.connect_timeout;
  options.query_timeout = config.postgres.query_timeout;
  options.acquire_timeout = config.postgres.query_timeout;
  return options;
}

relay::RedisSinkOptions redis_sink_options(const config::RedisSinkConfig& redis) {
  return relay::RedisSinkOptions{
      .host = redis.host,
      .port = redis.port,
      .password = redis.password,
      .database = redis.database,
      .connect_timeout = redis.connect_timeout,
      .command_timeout = redis.command_timeout,
      .stream = redis.stream,
      .maxlen = redis.maxlen,
      .dedup_window = redis.dedup_window,
      .dedup_prefix = redis.dedup_prefix,
      .wait_replicas = redis.wait_replicas,
      .wait_timeout = redis.wait_timeout,
  };
}

relay::HttpSinkOptions http_sink_options(const config::HttpSinkConfig& http) {
  return relay::HttpSinkOptions{
      .host = http.host,
      .port = http.port,
      .target = http.target,
      .tls = http.tls,
      .connect_timeout = http.connect_timeout,
      .timeout = http.timeout,
      .max_connections = http.max_connections,
      .secrets = http.secrets,
  };
}

relay::NatsSinkOptions nats_sink_options(const config::NatsSinkConfig& nats) {
  return relay::NatsSinkOptions{
      .url = nats.url,
      .stream = nats.stream,
      .subject = nats.subject,
      .connect_timeout = nats.connect_timeout,
      .publish_timeout = nats.publish_timeout,
      .max_in_flight = nats.max_in_flight,
  };
}

std::chrono::milliseconds nats_required_window(const config::RelayConfig& config) {
  return config.relay.lease + config.relay.backoff_max;
}

}  // namespace idem::app
