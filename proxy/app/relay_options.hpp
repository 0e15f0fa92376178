#pragma once
// idemrelay's parsed configuration (config/relay_config.hpp) translated into the options each
// relay module declares for itself: the one place that knows both shapes. Pure, no I/O.
#include <chrono>

#include "config/relay_config.hpp"
#include "pg/pool_options.hpp"
#include "relay/http_sink.hpp"
#include "relay/nats_jetstream_sink.hpp"
#include "relay/redis_stream_sink.hpp"
#include "relay/relay.hpp"
#include "relay/retention.hpp"

namespace idem::app {

relay::RelayOptions relay_options(const config::RelayConfig& config);
relay::RetentionOptions retention_options(const config::RetentionConfig& retention);
// The outbox source's pool: a connection per concurrent batch, one for retention and stats.
pg::PoolOptions outbox_pool_options(const config::RelayConfig& config);

relay::RedisSinkOptions redis_sink_options(const config::RedisSinkConfig& redis);
relay::HttpSinkOptions http_sink_options(const config::HttpSinkConfig& http);
relay::NatsSinkOptions nats_sink_options(const config::NatsSinkConfig& nats);
// The longest a row waits to be published again after a failure (relay.lease + relay.backoff.max):
// what the NATS stream's duplicate window must cover.
std::chrono::milliseconds nats_required_window(const config::RelayConfig& config);

}  // namespace idem::app
