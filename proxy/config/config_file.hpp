#pragma once
// Private to config: reading and parsing a configuration file, for both loaders.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <yaml-cpp/yaml.h>

#include "config/issue_sink.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config::detail {

struct FileError {
  std::string message;  // "cannot read WHAT: No such file or directory", "WHAT is larger than N bytes"
};

// The bytes of a regular file of at most max_bytes, or why they cannot be had. Every file a
// config names (the config itself, key files, token files) is read through this, so a hostile
// path (/dev/zero, a FIFO) is an error instead of a hang or an exhausted memory.
// `what` names the file in messages ("config file", "admin.token_file \"/run/token\"").
std::variant<std::string, FileError> read_bounded_file(const std::string& path, std::size_t max_bytes,
                                                       std::string_view what);

bool is_regular_file(const std::string& path);  // false when it is not, or cannot be checked

// The config file's bytes (at most 4 MiB).
std::variant<std::string, FileError> read_config_file(const std::string& path);

// The one YAML document of a config text (an empty node for an empty text). nullopt when the text
// is not YAML; a second document is reported and ignored. Problems go to `issues` with positions.
std::optional<YAML::Node> parse_config_document(std::string_view yaml, IssueSink& issues);

// A load's result (LoadResult, RelayLoadResult): the config only when no issue is an error.
template <class Result>
Result finish_load(IssueSink& issues, decltype(Result::config) config) {
  Result result;
  if (!issues.has_errors()) result.config = std::move(config);
  result.issues = issues.take_in_file_order();
  return result;
}

// Parses `yaml` and hands the document to `read_schema(document, reader)`, the binary's schema.
template <class Result, class ReadSchema>
Result load_config_text_with(std::string_view yaml, std::string_view file_name, const EnvLookup& env,
                             ReadSchema read_schema) {
  IssueSink issues{std::string(file_name)};
  const std::optional<YAML::Node> document = parse_config_document(yaml, issues);
  if (!document) return finish_load<Result>(issues, std::nullopt);
  decltype(Result::config) config;
  try {
    YamlReader reader(issues, env);
    config = read_schema(*document, reader);
  } catch (const YAML::Exception& error) {
    // The readers check node types before each access, so this is a yaml-cpp surprise; still
    // a config problem, never a crash.
    issues.error(error.mark, "cannot interpret the config: " + error.msg);
  }
  return finish_load<Result>(issues, std::move(config));
}

// Reads the file at `path` and loads its text with `load_text(text)`; a file that cannot be read
// is one issue without a position.
template <class Result, class LoadText>
Result load_config_file_with(const std::string& path, LoadText load_text) {
  auto contents = read_config_file(path);
  if (const auto* error = std::get_if<FileError>(&contents)) {
    IssueSink issues{path};
    issues.error_without_position(error->message);
    return finish_load<Result>(issues, std::nullopt);
  }
  Result result = load_text(std::get<std::string>(contents));
  if (result.config) result.config->source_path = path;
  return result;
}

}  // namespace idem::config::detail
