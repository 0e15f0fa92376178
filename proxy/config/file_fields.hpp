#pragma once
// Private to config: values that name files, checked or read at load so `--check` catches a
// typo'd, unreadable or hostile path (both binaries' TLS files, token and secret files).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "config/yaml_reader.hpp"

namespace idem::config::detail {

// A path the process can open for reading: a regular file (OpenSSL reads it later; a FIFO or a
// device would block it or never end). Problems are reported at the value.
std::optional<std::string> readable_file(YamlReader& yaml, const Field& field, std::string_view path);

struct SecretFile {
  std::string path;  // as the option names it, for messages
  std::string text;  // without trailing newlines and spaces (`echo` and editors end files in one)
};

// The file a secret's `*_file` option names. nullopt when it cannot be read (reported at the
// value); an empty text is for the caller to judge.
std::optional<SecretFile> read_secret_file(YamlReader& yaml, const Field& field, std::string_view path,
                                           std::size_t max_bytes);

}  // namespace idem::config::detail
