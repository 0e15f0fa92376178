#pragma once
// Loading idemrelay's configuration: YAML text or file -> RelayConfig (relay_config.hpp), with the
// same reader, ${VAR} expansion and file:line:col messages as idemproxy's (config_loader.hpp).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_loader.hpp"
#include "config/relay_config.hpp"

namespace idem::config {

struct RelayLoadResult {
  std::optional<RelayConfig> config;  // set only when there is no error (warnings allowed)
  std::vector<ConfigIssue> issues;    // every problem found, in file order
};

RelayLoadResult load_relay_config_file(const std::string& path, const EnvLookup& env = process_environment());
RelayLoadResult load_relay_config_text(std::string_view yaml, std::string_view file_name,
                                       const EnvLookup& env = process_environment());

// Parses "outbox.{aggregate_type}" into pieces; nullopt with `error` set when a placeholder is
// unknown or a brace is unbalanced ("{{" and "}}" are literal braces).
std::optional<MessageTemplate> parse_message_template(std::string_view text, std::string& error);

}  // namespace idem::config
