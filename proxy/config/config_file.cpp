#include "config/config_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

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

std::optional<YAML::Node> parse_config_document(std::string_view yaml, IssueSink& issues) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::Exception& error) {
    issues.error(error.mark, "invalid YAML: " + error.msg);
    return std::nullopt;
  }
  if (documents.size() > 1) issues.error(documents[1].Mark(), "a config file holds one YAML document; found a second one here");
  return documents.empty() ? YAML::Node() : documents.front();
}

}  // namespace idem::config::detail
