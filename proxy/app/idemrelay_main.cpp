// idemrelay: the outbox relay. Reads committed rows from the Postgres outbox table and publishes
// them to Redis Streams or an HTTP endpoint, at least once, in order per aggregate, deduplicated.
// The one place that wires concrete implementations: source, sink, relay loop, NOTIFY listener.
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <charconv>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "config/relay_config.hpp"
#include "log/log.hpp"
#include "pg/migrate.hpp"
#include "pg/replication_watch.hpp"
#include "pg/session_options.hpp"
#include "relay/http_sink.hpp"
#include "relay/nats_jetstream_sink.hpp"
#include "relay/migrations.hpp"
#include "relay/notify_listener.hpp"
#include "relay/outbox_source.hpp"
#include "relay/redis_stream_sink.hpp"
#include "relay/parked_commands.hpp"
#include "relay/relay.hpp"
#include "relay/stats.hpp"
#include "relay_admin.hpp"
#include "webhook_secret_reloader.hpp"

#ifndef IDEMRELAY_VERSION
#define IDEMRELAY_VERSION "0.0.0"
#endif

namespace {
using namespace idem;

constexpr std::string_view kUsage =
    "usage: idemrelay --config FILE [--check | --migrate | --list-parked [--aggregate T/ID] [--limit N]\n"
    "                                | --redrive ID | --redrive --aggregate T/ID | --redrive-all]\n"
    "       idemrelay --version\n"
    "\n"
    "  --config FILE   YAML configuration (see config/idemrelay.example.yaml)\n"
    "  --check         validate the configuration, print every problem as file:line:col, exit 1 if any;\n"
    "                  when Postgres is reachable, print its replication mode\n"
    "  --migrate       create or upgrade the outbox table, its indexes and NOTIFY trigger (idempotent)\n"
    "  --list-parked   print the dead-lettered rows as JSON, oldest first: id, aggregate, event type,\n"
    "                  attempts, when parked, the last error and how many rows wait behind each;\n"
    "                  at most --limit N (default 100, at most 1000; \"truncated\" says when more exist)\n"
    "  --aggregate T/ID  with --list-parked or --redrive: that aggregate only (type, '/', id)\n"
    "  --redrive ID    un-park the dead-lettered row ID (its aggregate's later rows follow it)\n"
    "  --redrive-all   un-park every dead-lettered row\n"
    "  --version       print the version\n"
    "\n"
    "Signals: SIGTERM/SIGINT finish or release the batches in hand and exit 0 (a second one exits at once);\n"
    "SIGHUP reads the webhook secrets again (as does a change of the config file or of a secret file).\n";

enum class Command { run, check, migrate, list_parked, redrive };

struct Options {
  std::string config_path;
  Command command = Command::run;
  std::optional<std::int64_t> redrive_id;
  bool redrive_all = false;
  std::optional<relay::AggregateRef> aggregate;
  std::optional<std::size_t> limit;
};

std::optional<Options> parse_arguments(int argc, char** argv) {
  Options options;
  int commands = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--version") {
      std::cout << "idemrelay " << IDEMRELAY_VERSION << "\n";
      std::exit(0);
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--config" && i + 1 < argc) {
      options.config_path = argv[++i];
    } else if (arg == "--check") {
      options.command = Command::check;
      ++commands;
    } else if (arg == "--migrate") {
      options.command = Command::migrate;
      ++commands;
    } else if (arg == "--list-parked") {
      options.command = Command::list_parked;
      ++commands;
    } else if (arg == "--redrive-all") {
      options.command = Command::redrive;
      options.redrive_all = true;
      ++commands;
    } else if (arg == "--redrive") {
      options.command = Command::redrive;
      ++commands;
      // `--redrive --aggregate T/ID` names no id.
      if (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--")) {
        const std::string_view text = argv[++i];
        std::int64_t id = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
        if (ec != std::errc{} || end != text.data() + text.size() || id <= 0) {
          std::cerr << "idemrelay: --redrive takes a positive outbox id, got \"" << text << "\"\n";
          return std::nullopt;
        }
        options.redrive_id = id;
      }
    } else if (arg == "--aggregate" && i + 1 < argc) {
      const std::string_view text = argv[++i];
      options.aggregate = relay::parse_aggregate(text);
      if (!options.aggregate) {
        std::cerr << "idemrelay: --aggregate takes TYPE/ID (e.g. order/42), got \"" << text << "\"\n";
        return std::nullopt;
      }
    } else if (arg == "--limit" && i + 1 < argc) {
      const std::string_view text = argv[++i];
      options.limit = relay::parse_parked_limit(text);
      if (!options.limit) {
        std::cerr << "idemrelay: --limit takes a number from 1 to " << relay::kMaxParkedLimit << ", got \"" << text
                  << "\"\n";
        return std::nullopt;
      }
    } else {
      std::cerr << "idemrelay: unexpected argument \"" << arg << "\"\n" << kUsage;
      return std::nullopt;
    }
  }
  if (options.config_path.empty()) {
    std::cerr << "idemrelay: --config FILE is required\n" << kUsage;
    return std::nullopt;
  }
  if (commands > 1) {
    std::cerr << "idemrelay: give at most one of --check, --migrate, --list-parked, --redrive, --redrive-all\n";
    return std::nullopt;
  }
  if (options.command == Command::redrive && !options.redrive_all &&
      options.redrive_id.has_value() == options.aggregate.has_value()) {
    std::cerr << "idemrelay: --redrive takes either an id or --aggregate T/ID\n";
    return std::nullopt;
  }
  if (options.aggregate && options.command != Command::list_parked && options.command != Command::redrive) {
    std::cerr << "idemrelay: --aggregate goes with --list-parked or --redrive\n";
    return std::nullopt;
  }
  if (options.redrive_all && options.aggregate) {
    std::cerr << "idemrelay: --redrive-all takes no --aggregate (use --redrive --aggregate T/ID)\n";
    return std::nullopt;
  }
  if (options.limit && options.command != Command::list_parked) {
    std::cerr << "idemrelay: --limit goes with --list-parked\n";
    return std::nullopt;
  }
  return options;
}

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
      .retention_max_age = config.retention.max_age,
      .retention_batch = config.retention.batch,
      .retention_interval = config.retention.interval,
  };
}

int run(const config::RelayConfig& config, const std::string& config_path,
        std::optional<app::FileVersion> config_version) {
  boost::asio::io_context io(1);
  relay::RelayStats stats;

  pg::PoolOptions pool_options;
  // The server cancels a statement a little before our deadline would orphan it (see session_options.hpp).
  pool_options.dsn = pg::with_session_settings(config.postgres.dsn, config.postgres.query_timeout * 9 / 10);
  pool_options.size = config.relay.concurrency + 1;  // a connection per lane, one for retention and stats
  pool_options.connect_timeout = config.postgres.connect_timeout;
  pool_options.query_timeout = config.postgres.query_timeout;
  pool_options.acquire_timeout = config.postgres.query_timeout;
  auto source = std::make_shared<relay::OutboxSource>(io, pool_options);

  std::shared_ptr<relay::Sink> sink;
  std::shared_ptr<relay::HttpSink> http_sink;  // its webhook secrets are reloaded
  try {
    switch (config.sink.kind) {
      case config::SinkKind::redis_streams:
        sink = std::make_shared<relay::RedisStreamSink>(io, config.sink.redis);
        break;
      case config::SinkKind::http:
        http_sink = std::make_shared<relay::HttpSink>(io, config.sink.http);
        sink = http_sink;
        break;
      case config::SinkKind::nats_jetstream:
        sink = std::make_shared<relay::NatsJetStreamSink>(io, config.sink.nats,
                                                          config.relay.lease + config.relay.backoff_max, stats);
        break;
    }
  } catch (const std::exception& error) {
    log::error("sink_setup_failed", {{"error", error.what()}});
    return 1;
  }

  auto loop = std::make_shared<relay::Relay>(io, relay_options(config), source, sink, stats);
  const auto replication = std::make_shared<pg::ReplicationWatch>(
      io, [source](pg::ReplicationSettingsHandler handler) { source->replication_settings(std::move(handler)); },
      stats.store_synchronous_replication);
  std::shared_ptr<relay::NotifyListener> listener;
  if (config.relay.notify) {
    const std::weak_ptr<relay::Relay> weak = loop;
    listener =
        std::make_shared<relay::NotifyListener>(io, config.postgres.dsn, config.postgres.connect_timeout, [weak] {
          if (const auto relay = weak.lock()) relay->wake();
        });
  }

  std::unique_ptr<app::RelayAdmin> admin;
  if (config.admin.enabled) {
    try {
      admin = std::make_unique<app::RelayAdmin>(config.admin, pool_options, stats);
      log::info("admin_listening", {{"address", config.admin.host + ":" + std::to_string(admin->port())}});
    } catch (const std::exception& error) {
      log::error("admin_listener_failed", {{"error", error.what()}});
      return 1;
    }
  }

  // Webhook secret rotation: SIGHUP or a changed config/secret file (webhook_secret_reloader.hpp).
  std::unique_ptr<app::WebhookSecretReloader> reloader;
  if (http_sink) {
    const std::weak_ptr<relay::HttpSink> weak_sink = http_sink;
    reloader = std::make_unique<app::WebhookSecretReloader>(
        config_path, config_version, config.sink.http.secret_files, [&io, weak_sink](std::vector<std::string> secrets) {
          boost::asio::post(io, [weak_sink, secrets = std::move(secrets)] {
            const auto sink = weak_sink.lock();
            auto signer = relay::WebhookSigner::from_secrets(secrets);
            if (sink && signer) sink->set_signer(std::move(*signer));
          });
        });
  }
  boost::asio::signal_set hangups(io, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_hangup = [&](const boost::system::error_code& error,
                                                                             int) {
    if (error) return;
    if (reloader) {
      reloader->hangup();
    } else {
      log::info("reload_ignored", {{"reason", "signal"}, {"why", "nothing to reload: only webhook secrets are"}});
    }
    hangups.async_wait(on_hangup);
  };
  hangups.async_wait(on_hangup);

  int exit_code = 0;
  bool stopping = false;
  boost::asio::steady_timer shutdown_deadline(io);
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& error,
                                                                             int signal_number) {
    if (error) return;
    if (stopping) {
      log::warn("shutdown_forced", {{"signal", signal_number}});
      std::_Exit(1);
    }
    stopping = true;
    log::info("stopping", {{"signal", signal_number}});
    if (listener) listener->stop();
    replication->stop();
    shutdown_deadline.expires_after(config.relay.shutdown_timeout);
    shutdown_deadline.async_wait([&](const boost::system::error_code& wait_error) {
      if (wait_error) return;
      log::error("shutdown_timed_out");  // batches still in hand: their leases will lapse
      exit_code = 1;
      io.stop();
    });
    if (reloader) reloader->stop();
    loop->stop([&] {
      shutdown_deadline.cancel();
      signals.cancel();
      hangups.cancel();
      io.stop();
    });
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);

  loop->start();
  if (listener) listener->start();
  replication->start();
  io.run();

  log::info("stopped", {{"published", static_cast<std::int64_t>(stats.published.load())},
                        {"duplicates", static_cast<std::int64_t>(stats.duplicates.load())},
                        {"publish_failures", static_cast<std::int64_t>(stats.publish_failures.load())},
                        {"parked", static_cast<std::int64_t>(stats.parked.load())},
                        {"released", static_cast<std::int64_t>(stats.released.load())},
                        {"lease_lost", static_cast<std::int64_t>(stats.lease_lost.load())},
                        {"retention_deleted", static_cast<std::int64_t>(stats.retention_deleted.load())}});
  return exit_code;
}

int relay_main(int argc, char** argv) {
  const std::optional<Options> options = parse_arguments(argc, argv);
  if (!options) return 2;
  std::signal(SIGPIPE, SIG_IGN);

  // Noted before the file is read: a change made while the relay starts still reloads the secrets.
  const std::optional<app::FileVersion> config_version = app::file_version(options->config_path);
  const config::RelayLoadResult loaded = config::load_relay_config_file(options->config_path);
  for (const config::ConfigIssue& issue : loaded.issues) std::cerr << issue.to_string() << "\n";
  if (!loaded.config) return options->command == Command::check ? 1 : 2;
  const config::RelayConfig& config = *loaded.config;

  switch (options->command) {
    case Command::check:
      std::cout << options->config_path << ": ok\n";
      // Informational only: a database that is down does not fail the check.
      std::cout << "postgres: " << pg::check_replication_report(config.postgres.dsn, config.postgres.connect_timeout)
                << "\n";
      if (config.sink.kind == config::SinkKind::nats_jetstream) {
        std::cout << relay::NatsJetStreamSink::check_report(config.sink.nats,
                                                            config.relay.lease + config.relay.backoff_max)
                  << "\n";
      }
      return 0;
    case Command::migrate: {
      const pg::MigrateResult result = pg::migrate(config.postgres.dsn, relay::relay_migration_set());
      if (!result.ok) {
        std::cerr << "idemrelay --migrate failed: " << result.error << "\n";
        return 1;
      }
      std::cout << "outbox schema at version " << result.schema_version << " (" << result.applied << " applied)\n";
      return 0;
    }
    case Command::list_parked: {
      const relay::ParkedQuery query{.limit = options->limit.value_or(relay::kDefaultParkedLimit),
                                     .aggregate = options->aggregate};
      const relay::ListParkedResult result = relay::list_parked(config.postgres.dsn, query);
      if (!result.list) {
        std::cerr << "idemrelay: " << result.error << "\n";
        return 1;
      }
      std::cout << relay::parked_json(*result.list);
      return 0;
    }
    case Command::redrive: {
      relay::RedriveTarget target = relay::RedriveAll{};
      if (options->redrive_id) target = *options->redrive_id;
      if (options->aggregate) target = *options->aggregate;
      const relay::RedriveResult result = relay::redrive(config.postgres.dsn, target);
      if (!result.ok) {
        std::cerr << "idemrelay: " << result.error << "\n";
        return 1;
      }
      if (options->redrive_id && result.ids.empty()) {
        std::cerr << "idemrelay: row " << *options->redrive_id
                  << " is not parked (no such row, already published, or never failed)\n";
        return 1;
      }
      if (options->aggregate && result.ids.empty()) {
        std::cerr << "idemrelay: aggregate " << options->aggregate->type << "/" << options->aggregate->id
                  << " has no parked row\n";
        return 1;
      }
      std::cout << "redriven " << result.ids.size() << " row(s)";
      for (const std::int64_t redriven : result.ids) std::cout << " " << redriven;
      std::cout << "\n";
      return 0;
    }
    case Command::run: return run(config, options->config_path, config_version);
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Anything thrown past the run loop (start-up only: the data path reports errors as values)
  // ends the process with a message instead of std::terminate's bare abort.
  try {
    return relay_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "idemrelay: fatal: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "idemrelay: fatal: unknown exception\n";
    return 1;
  }
}
