#include "store/pg/log.hpp"

#include <cstdio>
#include <string>

namespace idem::store::pg {

void log_event(std::string_view what, std::string_view detail) {
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == '\r' || detail.back() == ' ')) {
    detail.remove_suffix(1);
  }
  std::string line = "idemproxy pg: ";
  line.append(what);
  if (!detail.empty()) {
    line.append(": ");
    line.append(detail);
  }
  // libpq messages span lines ("...\n\tIs the server running...", DETAIL, HINT): one event, one
  // line, so each line break and its indentation become a single space.
  std::string flat;
  flat.reserve(line.size() + 1);
  for (const char c : line) {
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && !flat.empty() && flat.back() == ' ') continue;
    flat.push_back(space ? ' ' : c);
  }
  flat.push_back('\n');
  std::fwrite(flat.data(), 1, flat.size(), stderr);  // one write: lines from threads don't interleave
}

}  // namespace idem::store::pg
