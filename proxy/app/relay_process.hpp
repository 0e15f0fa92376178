#pragma once
// The running idemrelay: the outbox source (one Postgres pool), the sink the configuration names,
// the relay loop, retention (its janitor), the NOTIFY listener, the replication watch, the admin
// listener and the webhook secret reloader. The one place that picks implementations, as
// app/proxy_process is for idemproxy.
//
// Everything runs on `io`'s thread (the admin listener and the secret reloader on threads of their
// own); built, started, signalled and stopped from the thread that runs `io`.
#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "app/file_version.hpp"
#include "config/relay_config.hpp"
#include "relay/stats.hpp"

namespace idem::relay {
class HttpSink;
class NotifyListener;
class OutboxSource;
class Relay;
class Retention;
class Sink;
}  // namespace idem::relay
namespace idem::pg {
class ReplicationWatch;
}

namespace idem::app {

class RelayAdmin;
class WebhookSecretReloader;

class RelayProcess {
 public:
  // Builds everything and starts it on `io` (which the caller then runs). Null after logging what
  // failed (`sink_setup_failed`: the sink's host, TLS files or secrets; `admin_listener_failed`).
  // `config_version`: the config file's identity noted before it was read (secret reloads).
  static std::unique_ptr<RelayProcess> start(boost::asio::io_context& io, const config::RelayConfig& config,
                                             const std::string& config_path, std::optional<FileVersion> config_version);
  ~RelayProcess();
  RelayProcess(const RelayProcess&) = delete;
  RelayProcess& operator=(const RelayProcess&) = delete;

  // SIGHUP: the webhook secrets are read again (nothing else reloads; logged when there is none).
  void hangup();
  // Graceful stop: no new claims, retention and the watches end, the batches in hand are finished
  // or released; then `on_stopped` runs (posted on io).
  void stop(std::function<void()> on_stopped);

  const relay::RelayStats& stats() const { return stats_; }

 private:
  explicit RelayProcess(boost::asio::io_context& io);
  bool build(const config::RelayConfig& config, const std::string& config_path,
             std::optional<FileVersion> config_version);

  boost::asio::io_context& io_;
  relay::RelayStats stats_;
  std::shared_ptr<relay::OutboxSource> source_;
  std::shared_ptr<relay::Sink> sink_;
  std::shared_ptr<relay::HttpSink> http_sink_;  // the sink when webhooks: its secrets are reloaded
  std::shared_ptr<relay::Relay> relay_;
  std::shared_ptr<relay::Retention> retention_;
  std::shared_ptr<pg::ReplicationWatch> replication_;
  std::shared_ptr<relay::NotifyListener> listener_;  // null when relay.notify is off
  std::unique_ptr<RelayAdmin> admin_;
  std::unique_ptr<WebhookSecretReloader> reloader_;
};

}  // namespace idem::app
