#pragma once
// Server-side settings for pooled sessions (proxy and relay), added to the DSN's `options`.
//
// statement_timeout matters: when a statement passes our client-side deadline the pool closes the
// connection, but the server keeps running the statement until it next writes to the socket. An
// orphaned statement holds its snapshot (vacuum cannot remove dead rows behind it, so later
// statements get slower still) and its row locks. With statement_timeout just under the client
// deadline, the server cancels it itself.
#include <chrono>
#include <string>

namespace idem::pg {

// `dsn` (key=value or URI) as key=value with "-c statement_timeout=<ms> -c jit=off" appended to its
// options; `dsn` unchanged when libpq cannot parse it (connecting then reports the problem).
std::string with_session_settings(const std::string& dsn, std::chrono::milliseconds timeout);

}  // namespace idem::pg
