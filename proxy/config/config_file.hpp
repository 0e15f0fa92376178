#pragma once
// Private to config: reading a configuration file, bounded in size, for both loaders.
#include <string>
#include <variant>

namespace idem::config::detail {

struct FileError {
  std::string message;  // "cannot read config file: No such file or directory", "config file is larger than ..."
};

// The file's bytes, or why they cannot be had (unreadable, or larger than 4 MiB).
std::variant<std::string, FileError> read_config_file(const std::string& path);

}  // namespace idem::config::detail
