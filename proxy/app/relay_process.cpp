#include "app/relay_process.hpp"

#include <boost/asio/post.hpp>

#include <exception>
#include <utility>
#include <vector>

#include "app/relay_admin.hpp"
#include "app/relay_options.hpp"
#include "app/webhook_secret_reloader.hpp"
#include "log/log.hpp"
#include "pg/replication_watch.hpp"
#include "relay/http_sink.hpp"
#include "relay/nats_jetstream_sink.hpp"
#include "relay/notify_listener.hpp"
#include "relay/outbox_source.hpp"
#include "relay/redis_stream_sink.hpp"
#include "relay/relay.hpp"
#include "relay/retention.hpp"

namespace idem::app {

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
  const pg::PoolOptions postgres = outbox_pool_options(config);
  source_ = std::make_shared<relay::OutboxSource>(io_, postgres);
  try {
    switch (config.sink.kind) {
      case config::SinkKind::redis_streams:
        sink_ = std::make_shared<relay::RedisStreamSink>(io_, redis_sink_options(config.sink.redis));
        break;
      case config::SinkKind::http:
        http_sink_ = std::make_shared<relay::HttpSink>(io_, http_sink_options(config.sink.http));
        sink_ = http_sink_;
        break;
      case config::SinkKind::nats_jetstream:
        sink_ = std::make_shared<relay::NatsJetStreamSink>(io_, nats_sink_options(config.sink.nats),
                                                           nats_required_window(config), stats_);
        break;
    }
  } catch (const std::exception& error) {
    log::error("sink_setup_failed", {{"error", error.what()}});
    return false;
  }

  relay_ = std::make_shared<relay::Relay>(io_, relay_options(config), source_, sink_, stats_);
  retention_ = std::make_shared<relay::Retention>(io_, source_, retention_options(config.retention), stats_);
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
