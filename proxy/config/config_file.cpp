#include "config/config_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace idem::config::detail {
namespace {
// A config is a page of YAML; anything this large is a mistake (or a hostile file).
constexpr std::size_t kMaxConfigFileBytes = 4 * 1024 * 1024;

// Counts documents and remembers where the second one starts; ignores everything else.
class DocumentCounter : public YAML::EventHandler {
 public:
  int documents = 0;
  YAML::Mark second_start;

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents == 2) second_start = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};
}  // namespace

std::variant<std::string, FileError> read_bounded_file(const std::string& path, std::size_t max_bytes,
                                                       std::string_view what) {
  const auto unreadable = [&](std::string_view reason) {
    return FileError{"cannot read " + std::string(what) + ": " + std::string(reason)};
  };
  std::error_code status_error;
  const std::filesystem::file_status status = std::filesystem::status(path, status_error);
  if (status_error) return unreadable(status_error.message());
  // A FIFO or a device (/dev/zero, /dev/stdin) could block the load or never end.
  if (!std::filesystem::is_regular_file(status)) return unreadable("not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    return unreadable(error != 0 ? std::strerror(error) : "open failed");
  }
  // Read straight into the result (no intermediate buffer left holding a secret), one byte past
  // the bound to tell "exactly max_bytes" from "larger".
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return unreadable("read failed");
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_bytes)
    return FileError{std::string(what) + " is larger than " + std::to_string(max_bytes) + " bytes"};
  return text;
}

bool is_regular_file(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

std::variant<std::string, FileError> read_config_file(const std::string& path) {
  return read_bounded_file(path, kMaxConfigFileBytes, "config file");
}

std::optional<YAML::Node> parse_config_document(std::string_view yaml, IssueSink& issues) {
  // Not YAML::LoadAll: yaml-cpp 0.7 loops forever on some malformed streams (a lone ",") there,
  // appending null documents without end. Load parses exactly one document; a bounded second
  // pass only counts documents, to report a second one.
  YAML::Node document;
  DocumentCounter counter;
  try {
    document = YAML::Load(std::string(yaml));
    std::istringstream in{std::string(yaml)};
    YAML::Parser parser(in);
    while (counter.documents < 2 && parser.HandleNextDocument(counter)) {
    }
  } catch (const YAML::Exception& error) {
    issues.error(error.mark, "invalid YAML: " + error.msg);
    return std::nullopt;
  }
  if (counter.documents > 1)
    issues.error(counter.second_start, "a config file holds one YAML document; found a second one here");
  return document;
}

}  // namespace idem::config::detail
