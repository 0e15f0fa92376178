#include "config/file_fields.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <variant>

#include "config/config_file.hpp"

namespace idem::config::detail {

std::optional<std::string> readable_file(YamlReader& yaml, const Field& field, std::string_view path) {
  std::optional<std::string> file = yaml.string(field, path);
  if (!file) return std::nullopt;
  if (file->empty() || ::access(file->c_str(), R_OK) != 0) {
    yaml.issues().error(field.value.Mark(),
                        std::string(path) + ": cannot read " + quoted(*file) + ": " +
                            (file->empty() ? std::string("empty path") : std::string(std::strerror(errno))));
    return std::nullopt;
  }
  if (!is_regular_file(*file)) {
    yaml.issues().error(field.value.Mark(),
                        std::string(path) + ": cannot read " + quoted(*file) + ": not a regular file");
    return std::nullopt;
  }
  return file;
}

std::optional<SecretFile> read_secret_file(YamlReader& yaml, const Field& field, std::string_view path,
                                           std::size_t max_bytes) {
  std::optional<std::string> file = yaml.string(field, path);
  if (!file) return std::nullopt;
  auto contents = read_bounded_file(*file, max_bytes, std::string(path) + " " + quoted(*file));
  if (const auto* error = std::get_if<FileError>(&contents)) {
    yaml.issues().error(field.value.Mark(), error->message);
    return std::nullopt;
  }
  std::string secret = std::move(std::get<std::string>(contents));
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ')) secret.pop_back();
  return SecretFile{.path = std::move(*file), .text = std::move(secret)};
}

}  // namespace idem::config::detail
