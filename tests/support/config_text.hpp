#pragma once
// Config files for the binaries under test: templates with ${NAME} placeholders, YAML scalars,
// and writing the result to disk.
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

namespace idem::test {

// Replaces each ${NAME} of variables in text (names not in variables stay as they are, e.g. for
// the binary's own environment expansion).
std::string render_template(std::string_view text, const std::map<std::string, std::string>& variables);

// A YAML double-quoted scalar holding text.
std::string yaml_quoted(std::string_view text);

// Replaces path's content (truncate and write: a new mtime). Throws std::runtime_error on failure.
void write_file(const std::filesystem::path& path, std::string_view text);

}  // namespace idem::test
