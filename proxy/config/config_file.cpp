#include "config/config_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace idem::config::detail {
namespace {
// A config is a page of YAML; anything this large is a mistake (or a hostile file).
constexpr std::size_t kMaxConfigFileBytes = 4 * 1024 * 1024;
}  // namespace

std::variant<std::string, FileError> read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text;
  if (in) {
    char chunk[64 * 1024];
    while (text.size() <= kMaxConfigFileBytes && in.read(chunk, sizeof chunk)) text.append(chunk, sizeof chunk);
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  }
  if (!in && !in.eof()) {
    const int error = errno;
    return FileError{"cannot read config file: " + std::string(error != 0 ? std::strerror(error) : "read failed")};
  }
  if (text.size() > kMaxConfigFileBytes) {
    return FileError{"config file is larger than " + std::to_string(kMaxConfigFileBytes) + " bytes"};
  }
  return text;
}

}  // namespace idem::config::detail
