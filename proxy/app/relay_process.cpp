#include "app/relay_process.hpp"

#include <boost/asio/post.hpp>

#include <exception>
#include <utility>
#include <vector>

#include "app/relay_admin.hpp"
#include "app/webhook_secret_reloader.hpp"
#include "log/log.hpp"
#include "pg/pool_options.hpp"
#include "pg/replication_watch.hpp"
#include "pg/session_options.hpp"
#include "relay/http_sink.hpp"
#include "relay/nats_jetstream_sink.hpp"
#include "relay/notify_listener.hpp"
#include "relay/outbox_source.hpp"
#include "relay/redis_stream_sink.hpp"
#include "relay/relay.hpp"
#include "relay/retention.hpp"

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

pg::PoolOptions pool_options(const config::RelayConfig& config) {
  pg::PoolOptions options;
  // The server cancels a statement a little before our deadline would orphan it (see session_options.hpp).
  options.dsn = pg::with_session_settings(config.postgres.dsn, config.postgres.query_timeout * 9 / 10);
  options.size = config.relay.concurrency + 1;  // a connection per worker, one for retention and stats
  options.connect_timeout = config.postgres.connect_timeout;
  options.query_timeout = config.postgres.query_timeout;
  options.acquire_timeout = config.postgres.query_timeout;
  return options;
}

}  // namespace

std::unique_ptr<RelayProcess> RelayProcess::start(boost::asio::io_context& io, const config::RelayConfig& config,
                                                  const std::string& config_path,
                                                  std::optional<FileVersion> config_version) {
  std::unique_ptr<RelayProcess> process(new RelayProcess(io));
  if (!process->build(config, config_path, config_version)) return nullptr;
  process->relay_->start();
  process->retention_->start();
  if (process->listener_) process->listener_->start();
  process->replication_->start();
  return process;
}

RelayProcess::RelayProcess(boost::asio::io_context& io) : io_(io) {}

RelayProcess::~RelayProcess() = default;

bool RelayProcess::build(const config::RelayConfig& config, const std::string& config_path,
                         std::optional<FileVersion> config_version) {
  const pg::PoolOptions postgres = pool_options(config);
  source_ = std::make_shared<relay::OutboxSource>(io_, postgres);
  try {
    switch (config.sink.kind) {
      case config::SinkKind::redis_streams:
        sink_ = std::make_shared<relay::RedisStreamSink>(io_, config.sink.redis);
        break;
      case config::SinkKind::http:
        http_sink_ = std::make_shared<relay::HttpSink>(io_, config.sink.http);
        sink_ = http_sink_;
        break;
      case config::SinkKind::nats_jetstream:
        sink_ = std::make_shared<relay::NatsJetStreamSink>(io_, config.sink.nats,
                                                           config.relay.lease + config.relay.backoff_max, stats_);
        break;
    }
  } catch (const std::exception& error) {
    log::error("sink_setup_failed", {{"error", error.what()}});
    return false;
  }

  relay_ = std::make_shared<relay::Relay>(io_, relay_options(config), source_, sink_, stats_);
  retention_ = std::make_shared<relay::Retention>(
      io_, source_,
      relay::RetentionOptions{
          .max_age = config.retention.max_age, .batch = config.retention.batch, .interval = config.retention.interval},
      stats_);
  replication_ = std::make_shared<pg::ReplicationWatch>(
      io_,
      [source = source_](pg::ReplicationSettingsHandler handler) { source->replication_settings(std::move(handler)); },
      stats_.store_synchronous_replication);
  if (config.relay.notify) {
    const std::weak_ptr<relay::Relay> weak = relay_;
    listener_ =
        std::make_shared<relay::NotifyListener>(io_, config.postgres.dsn, config.postgres.connect_timeout, [weak] {
          if (const auto relay = weak.lock()) relay->wake();
        });
  }

  if (config.admin.enabled) {
    try {
      admin_ = std::make_unique<RelayAdmin>(config.admin, postgres, stats_);
      log::info("admin_listening", {{"address", config.admin.host + ":" + std::to_string(admin_->port())}});
    } catch (const std::exception& error) {
      log::error("admin_listener_failed", {{"error", error.what()}});
      return false;
    }
  }

  // Webhook secret rotation: SIGHUP or a changed config/secret file (webhook_secret_reloader.hpp).
  if (http_sink_) {
    const std::weak_ptr<relay::HttpSink> weak_sink = http_sink_;
    reloader_ =
        std::make_unique<WebhookSecretReloader>(config_path, config_version, config.sink.http.secret_files,
                                                [&io = io_, weak_sink](std::vector<std::string> secrets) {
                                                  boost::asio::post(io, [weak_sink, secrets = std::move(secrets)] {
                                                    const auto sink = weak_sink.lock();
                                                    auto signer = relay::WebhookSigner::from_secrets(secrets);
                                                    if (sink && signer) sink->set_signer(std::move(*signer));
                                                  });
                                                });
  }
  return true;
}

void RelayProcess::hangup() {
  if (reloader_) {
    reloader_->hangup();
  } else {
    log::info("reload_ignored", {{"reason", "signal"}, {"why", "nothing to reload: only webhook secrets are"}});
  }
}

void RelayProcess::stop(std::function<void()> on_stopped) {
  if (listener_) listener_->stop();
  replication_->stop();
  retention_->stop();  // before the relay stops the source under it
  if (reloader_) reloader_->stop();
  relay_->stop(std::move(on_stopped));
}

}  // namespace idem::app
