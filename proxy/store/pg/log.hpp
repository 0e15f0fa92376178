#pragma once
// Event reporting for the Postgres store (failures, reconnects): one line on stderr per event. Kept to this one
// function so the project's logger can replace it without touching callers.
#include <string_view>

namespace idem::store::pg {

// Writes "idemproxy pg: <what>: <detail>" (trailing newlines of libpq messages trimmed).
void log_event(std::string_view what, std::string_view detail);

}  // namespace idem::store::pg
