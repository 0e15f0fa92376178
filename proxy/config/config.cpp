// Entry points of the config loader: read the file, parse the YAML, hand the document to the
// schema (config_reader.cpp) and return every issue found.
#include "config/config_loader.hpp"

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config_file.hpp"
#include "config/config_reader.hpp"
#include "config/issue_sink.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config {
namespace {

// The restart-only settings of Config, each with its name: `visit(name, a's field, b's field)`.
// Config's comments mark these; a field marked there is listed here.
template <class ConfigA, class ConfigB, class Visit>
void for_each_restart_only(ConfigA& a, ConfigB& b, Visit visit) {
  visit("listen", a.listen, b.listen);
  visit("workers", a.workers, b.workers);
  visit("upstream", a.upstream, b.upstream);
  visit("store", a.store, b.store);
  visit("admin", a.admin, b.admin);
  visit("replay_cache", a.replay_cache, b.replay_cache);
  visit("reaper", a.reaper, b.reaper);
}

}  // namespace

std::vector<std::string> restart_only_changes(const Config& before, const Config& after) {
  std::vector<std::string> changed;
  for_each_restart_only(before, after, [&](std::string_view name, const auto& old_value, const auto& new_value) {
    if (old_value != new_value) changed.emplace_back(name);
  });
  return changed;
}

Config keep_restart_only(Config next, const Config& running) {
  for_each_restart_only(next, running, [](std::string_view, auto& field, const auto& current) { field = current; });
  return next;
}

core::ExchangeTimeouts exchange_timeouts(const UpstreamConfig& upstream, const PostgresConfig& postgres) {
  return {.store_query = postgres.query_timeout,
          .store_acquire = postgres.acquire_timeout,
          .connect = upstream.connect_timeout,
          .upstream_tls = upstream.tls.enabled,
          .upstream = upstream.timeout};
}

std::string ConfigIssue::to_string() const {
  std::string text = file;
  if (line > 0) text += ":" + std::to_string(line) + ":" + std::to_string(column);
  text += ": ";
  if (warning) text += "warning: ";
  text += message;
  return text;
}

EnvLookup process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const std::string variable(name);
    // Config loads at start-up, before any thread that could call setenv exists.
    if (const char* value = std::getenv(variable.c_str())) return std::string(value);
    return std::nullopt;
  };
}

LoadResult load_config_text(std::string_view yaml, std::string_view file_name, const EnvLookup& env,
                            const Config* running) {
  return detail::load_config_text_with<LoadResult>(yaml, file_name, env,
                                                   [running](const YAML::Node& document, detail::YamlReader& reader) {
                                                     return detail::read_config(document, reader, running);
                                                   });
}

LoadResult load_config_file(const std::string& path, const EnvLookup& env, const Config* running) {
  return detail::load_config_file_with<LoadResult>(
      path, [&](std::string_view text) { return load_config_text(text, path, env, running); });
}

}  // namespace idem::config
