#pragma once
// Event reporting for the Postgres driver (failures, reconnects, server notices), through the
// process's structured log so every stderr line stays one JSON object.

#include <string_view>

namespace idem::pg {

// A warn-level "postgres" event: {"message": what, "detail": detail}. libpq's multi-line messages
// ("...\n\tIs the server running...", DETAIL, HINT) become one line.
void log_event(std::string_view what, std::string_view detail);

// For PQsetNoticeProcessor: server notices and warnings (e.g. "terminating connection due to
// administrator command" before a shutdown) become "postgres" events instead of raw stderr text.
void log_notice(void* unused, const char* message);

}  // namespace idem::pg
