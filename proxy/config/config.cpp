// Entry points of the config loader: read the file, parse the YAML, hand the document to the
// schema (config_reader.cpp) and return every issue found.
#include "config/config.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "config/config_file.hpp"
#include "config/config_reader.hpp"
#include "config/issue_sink.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config {
namespace {

// A config file is a few kilobytes; anything this large is the wrong file.

LoadResult finish(detail::IssueSink& issues, std::optional<Config> config) {
  LoadResult result;
  if (!issues.has_errors()) result.config = std::move(config);
  result.issues = issues.take_in_file_order();
  return result;
}

}  // namespace

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
  detail::IssueSink issues{std::string(file_name)};
  const std::optional<YAML::Node> document = detail::parse_config_document(yaml, issues);
  if (!document) return finish(issues, std::nullopt);

  std::optional<Config> config;
  try {
    detail::YamlReader reader(issues, env);
    config = detail::read_config(*document, reader, running);
  } catch (const YAML::Exception& error) {
    // The reader checks node types before each access, so this is a yaml-cpp surprise; still
    // a config problem, never a crash.
    issues.error(error.mark, "cannot interpret the config: " + error.msg);
  }
  return finish(issues, std::move(config));
}

LoadResult load_config_file(const std::string& path, const EnvLookup& env, const Config* running) {
  auto contents = detail::read_config_file(path);
  if (const auto* error = std::get_if<detail::FileError>(&contents)) {
    detail::IssueSink issues{path};
    issues.error_without_position(error->message);
    return finish(issues, std::nullopt);
  }
  const std::string& text = std::get<std::string>(contents);
  LoadResult result = load_config_text(text, path, env, running);
  if (result.config) result.config->source_path = path;
  return result;
}

}  // namespace idem::config
