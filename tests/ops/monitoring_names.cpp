#include "ops/monitoring_names.hpp"

#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace idem::test::ops {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':';
}

std::string read_whole(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::set<std::string> series_names(std::string_view exposition) {
  std::set<std::string> names;
  std::istringstream lines{std::string(exposition)};
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::size_t end = 0;
    while (end < line.size() && is_name_char(line[end])) ++end;
    names.insert(line.substr(0, end));
  }
  return names;
}

}  // namespace

std::set<std::string> monitoring_metric_names(const std::filesystem::path& monitoring_dir, std::string_view prefix) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(monitoring_dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string text = read_whole(entry.path());
    std::size_t i = 0;
    while (i < text.size()) {
      if (!is_name_char(text[i])) {
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < text.size() && is_name_char(text[end])) ++end;
      const std::string_view token(text.data() + i, end - i);
      if (token.substr(0, prefix.size()) == prefix && token.find(':') == std::string_view::npos) {
        names.emplace(token);
      }
      i = end;
    }
  }
  return names;
}

std::vector<std::string> names_not_exported(const std::set<std::string>& used, std::string_view exposition) {
  const std::set<std::string> exported = series_names(exposition);
  std::vector<std::string> missing;
  for (const std::string& name : used) {
    if (!exported.contains(name) && !exported.contains(name + "_bucket")) missing.push_back(name);
  }
  return missing;
}

}  // namespace idem::test::ops
