#pragma once
// Private to config: reading and parsing a configuration file, for both loaders.
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <yaml-cpp/yaml.h>

#include "config/issue_sink.hpp"

namespace idem::config::detail {

struct FileError {
  std::string message;  // "cannot read config file: No such file or directory", "config file is larger than ..."
};

// The file's bytes, or why they cannot be had (unreadable, or larger than 4 MiB).
std::variant<std::string, FileError> read_config_file(const std::string& path);

// The one YAML document of a config text (an empty node for an empty text). nullopt when the text
// is not YAML; a second document is reported and ignored. Problems go to `issues` with positions.
std::optional<YAML::Node> parse_config_document(std::string_view yaml, IssueSink& issues);

}  // namespace idem::config::detail
