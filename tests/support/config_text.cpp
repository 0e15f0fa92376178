#include "support/config_text.hpp"

#include <fstream>
#include <stdexcept>

namespace idem::test {

std::string render_template(std::string_view text, const std::map<std::string, std::string>& variables) {
  std::string out;
  std::size_t position = 0;
  while (position < text.size()) {
    const auto open = text.find("${", position);
    if (open == std::string_view::npos) break;
    const auto close = text.find('}', open);
    if (close == std::string_view::npos) break;
    out.append(text.substr(position, open - position));
    const auto it = variables.find(std::string(text.substr(open + 2, close - open - 2)));
    if (it != variables.end()) {
      out += it->second;
    } else {
      out.append(text.substr(open, close - open + 1));
    }
    position = close + 1;
  }
  out.append(text.substr(position));
  return out;
}

std::string yaml_quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

void write_file(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace idem::test
