#pragma once
// Server-side settings for the relay's pooled sessions, added to the DSN's `options`.
//
// statement_timeout matters: when a statement passes our client-side deadline the pool closes the
// connection, but the server keeps running the statement until it next writes to the socket. An
// orphaned claim holds its snapshot (vacuum cannot remove dead outbox rows behind it, so later
// claims get slower still) and its row locks. With statement_timeout just under the client
// deadline, the server cancels it itself.
#include <chrono>
#include <string>

namespace idem::relay {

// `dsn` (key=value or URI) as key=value with "-c statement_timeout=<ms>" appended to its options;
// `dsn` unchanged when libpq cannot parse it (connecting then reports the problem).
std::string with_statement_timeout(const std::string& dsn, std::chrono::milliseconds timeout);

}  // namespace idem::relay
