#include "pg/log.hpp"

#include <string>

#include "log/log.hpp"

namespace idem::pg {
std::string one_line(std::string_view text) {
  std::string flat;
  flat.reserve(text.size());
  for (const char c : text) {
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (flat.empty() || flat.back() == ' ')) continue;
    flat.push_back(space ? ' ' : c);
  }
  if (!flat.empty() && flat.back() == ' ') flat.pop_back();
  return flat;
}

void log_event(std::string_view what, std::string_view detail) {
  const std::string flat = one_line(detail);
  if (flat.empty()) {
    log::warn("postgres", {{"message", what}});
  } else {
    log::warn("postgres", {{"message", what}, {"detail", flat}});
  }
}

void log_notice(void* /*unused*/, const char* message) {
  log::warn("postgres", {{"message", "server notice"}, {"detail", one_line(message != nullptr ? message : "")}});
}

}  // namespace idem::pg
