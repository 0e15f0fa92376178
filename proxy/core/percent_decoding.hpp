#pragma once
// RFC 3986 percent-decoding of a path segment or query value, for the admin listeners' targets.
#include <optional>
#include <string>
#include <string_view>

namespace idem::core {

// nullopt when a '%' is not followed by two hex digits. '+' stays '+' (no form decoding).
std::optional<std::string> percent_decode(std::string_view text);

}  // namespace idem::core
