#pragma once
// idemrelay's commands that run once against the configured database and exit:
//   --check        (after the configuration loaded) the database's replication mode, informational
//   --migrate      the outbox schema (relay/migrations.hpp)
//   --list-parked [--aggregate T/ID] [--limit N], --redrive ID | --aggregate T/ID, --redrive-all
// Each opens one blocking session (pg/blocking_session.hpp): command line only.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "config/relay_config.hpp"
#include "relay/parked_rows.hpp"

namespace idem::app {

struct RelayCommand {
  enum class Kind { check, migrate, list_parked, redrive } kind = Kind::check;
  std::optional<std::int64_t> redrive_id;        // --redrive ID
  bool redrive_all = false;                      // --redrive-all
  std::optional<relay::AggregateRef> aggregate;  // --aggregate T/ID (list_parked, redrive)
  std::optional<std::size_t> limit;              // --limit N (list_parked)
};

// Prints the outcome and returns the exit code: 0 done, 1 failed (or nothing to redrive).
int run_relay_command(const config::RelayConfig& config, const std::string& config_path, const RelayCommand& command);

}  // namespace idem::app
