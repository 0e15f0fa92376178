#pragma once
// Private to config: formatting counterparts of parse_duration / parse_byte_size (config.hpp),
// used to echo values back in messages.
#include <chrono>
#include <string>

namespace idem::config::detail {

// Whole hours when exact, else whole seconds, else milliseconds: "24h", "60s", "90s", "250ms".
// (No minutes: "60s" reads as users usually write a lease, and seconds never lose precision.)
std::string format_duration(std::chrono::milliseconds value);

}  // namespace idem::config::detail
