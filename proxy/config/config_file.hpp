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

}  // namespace idem::config::detail
