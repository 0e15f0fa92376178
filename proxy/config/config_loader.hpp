#pragma once
// Loading idemproxy's configuration: YAML text or file -> Config (config.hpp), every issue with
// its file:line:col, and what a reload may change. Used by app/ (start-up, reload, --check), the
// config tests and the fuzz target; nothing on the data path.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace idem::config {

// The restart-only settings (marked in Config) that `after` changes from `before`, named as the
// file names them ("store", "reaper"), in Config's order.
std::vector<std::string> restart_only_changes(const Config& before, const Config& after);
// `next` with the restart-only settings of `running` put back: what a reload puts in force.
Config keep_restart_only(Config next, const Config& running);

struct ConfigIssue {
  std::string file;
  int line = 0;    // 1-based; 0 when the issue has no position (e.g. file unreadable)
  int column = 0;  // 1-based
  std::string message;
  bool warning = false;           // warnings do not make the config invalid
  std::string to_string() const;  // "file:line:col: message" (prefixed "warning: " when a warning)
};

struct LoadResult {
  std::optional<Config> config;     // set only when there is no error (warnings allowed)
  std::vector<ConfigIssue> issues;  // every problem found, in file order
};

// Environment lookup for ${VAR} / ${VAR:-default} expansion in scalar values.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup process_environment();

// `running`: on a reload (or `--check --against`), the configuration in force. The sections only
// a restart changes (upstream, store) stay as they run, so the rules between options (a route's
// lease against the upstream's timeout) are checked against the running sections, not the file's;
// and each route whose stored keys the change makes unreachable is warned about
// (key_space_changes.hpp).
LoadResult load_config_file(const std::string& path, const EnvLookup& env = process_environment(),
                            const Config* running = nullptr);
LoadResult load_config_text(std::string_view yaml, std::string_view file_name,
                            const EnvLookup& env = process_environment(), const Config* running = nullptr);

// "250ms", "1s", "1.5s", "2m", "24h", "7d" -> milliseconds. nullopt when malformed.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
// "512", "64KiB", "1MiB", "1GiB", "10MB", "1kB" -> bytes. nullopt when malformed.
std::optional<std::size_t> parse_byte_size(std::string_view text);

}  // namespace idem::config
