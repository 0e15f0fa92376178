// idemrelay: the outbox relay. Reads committed rows from the Postgres outbox table and publishes
// them to Redis Streams, HTTP webhooks or NATS JetStream, at least once, in order per aggregate.
// Command line and the commands that run once (app/relay_commands); running is app/relay_process
// (the wiring) under the signal loop below.
#include <csignal>
#include <cstdlib>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <charconv>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "app/file_version.hpp"
#include "app/relay_commands.hpp"
#include "app/relay_process.hpp"
#include "config/relay_config_loader.hpp"
#include "log/log.hpp"
#include "relay/parked_rows.hpp"

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

using Command = app::RelayCommand::Kind;

struct Options {
  std::string config_path;
  std::optional<app::RelayCommand> command;  // none: run the relay
};

std::optional<Options> parse_arguments(int argc, char** argv) {
  Options options;
  app::RelayCommand command;  // what the arguments say; a command only when one of them names it
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
      command.kind = Command::check;
      ++commands;
    } else if (arg == "--migrate") {
      command.kind = Command::migrate;
      ++commands;
    } else if (arg == "--list-parked") {
      command.kind = Command::list_parked;
      ++commands;
    } else if (arg == "--redrive-all") {
      command.kind = Command::redrive;
      command.redrive_all = true;
      ++commands;
    } else if (arg == "--redrive") {
      command.kind = Command::redrive;
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
        command.redrive_id = id;
      }
    } else if (arg == "--aggregate" && i + 1 < argc) {
      const std::string_view text = argv[++i];
      command.aggregate = relay::parse_aggregate(text);
      if (!command.aggregate) {
        std::cerr << "idemrelay: --aggregate takes TYPE/ID (e.g. order/42), got \"" << text << "\"\n";
        return std::nullopt;
      }
    } else if (arg == "--limit" && i + 1 < argc) {
      const std::string_view text = argv[++i];
      command.limit = relay::parse_parked_limit(text);
      if (!command.limit) {
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
  const bool named = commands == 1;
  if (named && command.kind == Command::redrive && !command.redrive_all &&
      command.redrive_id.has_value() == command.aggregate.has_value()) {
    std::cerr << "idemrelay: --redrive takes either an id or --aggregate T/ID\n";
    return std::nullopt;
  }
  if (command.aggregate && !(named && (command.kind == Command::list_parked || command.kind == Command::redrive))) {
    std::cerr << "idemrelay: --aggregate goes with --list-parked or --redrive\n";
    return std::nullopt;
  }
  if (command.redrive_all && command.aggregate) {
    std::cerr << "idemrelay: --redrive-all takes no --aggregate (use --redrive --aggregate T/ID)\n";
    return std::nullopt;
  }
  if (command.limit && !(named && command.kind == Command::list_parked)) {
    std::cerr << "idemrelay: --limit goes with --list-parked\n";
    return std::nullopt;
  }
  if (named) options.command = std::move(command);
  return options;
}

// Runs the relay until SIGTERM/SIGINT has it finish or release the batches in hand (a second
// signal exits at once); SIGHUP reloads the webhook secrets. One io thread.
int run(const config::RelayConfig& config, const std::string& config_path,
        std::optional<app::FileVersion> config_version) {
  boost::asio::io_context io(1);
  const std::unique_ptr<app::RelayProcess> process = app::RelayProcess::start(io, config, config_path, config_version);
  if (!process) return 1;

  boost::asio::signal_set hangups(io, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_hangup = [&](const boost::system::error_code& error,
                                                                             int) {
    if (error) return;
    process->hangup();
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
    shutdown_deadline.expires_after(config.relay.shutdown_timeout);
    shutdown_deadline.async_wait([&](const boost::system::error_code& wait_error) {
      if (wait_error) return;
      log::error("shutdown_timed_out");  // batches still in hand: their leases will lapse
      exit_code = 1;
      io.stop();
    });
    process->stop([&] {
      shutdown_deadline.cancel();
      signals.cancel();
      hangups.cancel();
      io.stop();
    });
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  io.run();

  const relay::RelayStats& stats = process->stats();
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
  const bool checking = options->command && options->command->kind == Command::check;
  if (!loaded.config) return checking ? 1 : 2;
  if (options->command) return app::run_relay_command(*loaded.config, options->config_path, *options->command);
  return run(*loaded.config, options->config_path, config_version);
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
