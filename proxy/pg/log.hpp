#pragma once
// Event reporting for the Postgres driver (failures, reconnects, server notices), through the
// process's structured log so every stderr line stays one JSON object.

#include <string>
#include <string_view>

namespace idem::pg {

// Trailing line breaks trimmed, and each run of line breaks, tabs and spaces made one space
// (libpq's messages span lines).
std::string one_line(std::string_view text);

// A warn-level "postgres" event: {"message": what, "detail": detail}. libpq's multi-line messages
// ("...\n\tIs the server running...", DETAIL, HINT) become one line.
void log_event(std::string_view what, std::string_view detail);

// For PQsetNoticeProcessor: server notices and warnings (e.g. "terminating connection due to
// administrator command" before a shutdown) become "postgres" events instead of raw stderr text.
void log_notice(void* unused, const char* message);

}  // namespace idem::pg
