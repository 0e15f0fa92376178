#pragma once
// One header field's value from its lines: a field sent on several lines reads as their values
// joined by ", " (RFC 9110 §5.3). Scopes and fingerprints read fields this way, whichever layer
// holds the lines (a Beast request in the exchange, name/value pairs in the admin API).
#include <optional>
#include <string>
#include <string_view>

namespace idem::core {

inline void append_field_line(std::optional<std::string>& joined, std::string_view line) {
  if (joined)
    *joined += ", ";
  else
    joined.emplace();
  *joined += line;
}

}  // namespace idem::core
