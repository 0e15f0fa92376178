#include "app/relay_commands.hpp"

#include <iostream>

#include "app/relay_options.hpp"
#include "pg/blocking_session.hpp"
#include "pg/connect_params.hpp"
#include "pg/migrate.hpp"
#include "pg/replication_watch.hpp"
#include "relay/migrations.hpp"
#include "relay/nats_jetstream_sink.hpp"
#include "relay/parked_commands.hpp"

namespace idem::app {
namespace {

int migrate(const config::RelayConfig& config) {
  const pg::MigrateResult result =
      pg::migrate(config.postgres.dsn, relay::relay_migration_set(), config.postgres.connect_timeout);
  if (!result.ok) {
    std::cerr << "idemrelay --migrate failed: " << result.error << "\n";
    return 1;
  }
  std::cout << "outbox schema at version " << result.schema_version << " (" << result.applied << " applied)\n";
  return 0;
}

int list_parked(pg::BlockingSession& session, const RelayCommand& command) {
  const relay::ParkedQuery query{.limit = command.limit.value_or(relay::kDefaultParkedLimit),
                                 .aggregate = command.aggregate};
  const relay::ListParkedResult result = relay::list_parked(session, query);
  if (!result.list) {
    std::cerr << "idemrelay: " << result.error << "\n";
    return 1;
  }
  std::cout << relay::parked_json(*result.list);
  return 0;
}

int redrive(pg::BlockingSession& session, const RelayCommand& command) {
  relay::RedriveTarget target = relay::RedriveAll{};
  if (command.redrive_id) target = *command.redrive_id;
  if (command.aggregate) target = *command.aggregate;
  const relay::RedriveResult result = relay::redrive(session, target);
  if (!result.ok) {
    std::cerr << "idemrelay: " << result.error << "\n";
    return 1;
  }
  if (command.redrive_id && result.ids.empty()) {
    std::cerr << "idemrelay: row " << *command.redrive_id
              << " is not parked (no such row, already published, or never failed)\n";
    return 1;
  }
  if (command.aggregate && result.ids.empty()) {
    std::cerr << "idemrelay: aggregate " << command.aggregate->type << "/" << command.aggregate->id
              << " has no parked row\n";
    return 1;
  }
  std::cout << "redriven " << result.ids.size() << " row(s)";
  for (const std::int64_t redriven : result.ids) std::cout << " " << redriven;
  std::cout << "\n";
  return 0;
}

}  // namespace

int run_relay_command(const config::RelayConfig& config, const std::string& config_path, const RelayCommand& command) {
  switch (command.kind) {
    case RelayCommand::Kind::check:
      std::cout << config_path << ": ok\n";
      // Informational only: a database that is down does not fail the check.
      std::cout << "postgres: " << pg::check_replication_report(config.postgres.dsn, config.postgres.connect_timeout)
                << "\n";
      if (config.sink.kind == config::SinkKind::nats_jetstream) {
        std::cout << relay::NatsJetStreamSink::check_report(nats_sink_options(config.sink.nats),
                                                            nats_required_window(config))
                  << "\n";
      }
      return 0;
    case RelayCommand::Kind::migrate: return migrate(config);
    case RelayCommand::Kind::list_parked:
    case RelayCommand::Kind::redrive: {
      pg::BlockingSession session(config.postgres.dsn, config.postgres.connect_timeout, pg::kSessionServerOptions);
      if (!session.ok()) {
        std::cerr << "idemrelay: " << session.error() << "\n";
        return 1;
      }
      return command.kind == RelayCommand::Kind::list_parked ? list_parked(session, command)
                                                             : redrive(session, command);
    }
  }
  return 1;
}

}  // namespace idem::app
