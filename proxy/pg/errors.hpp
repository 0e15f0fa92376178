#pragma once
// What went wrong with a connection or a statement, and the one place where a SQLSTATE becomes
// a named error.
#include <libpq-fe.h>

#include <string>
#include <string_view>

namespace idem::pg {

enum class PgErrorKind {
  ok,
  unavailable,  // the statement certainly did not run: no usable connection (connect failed or timed
                // out, lost before the statement went out, server full or starting), or the server
                // refused it with an error on a connection that stayed healthy (e.g. 57014)
  busy,         // the statement certainly did not run, but the server is up: no connection free
                // within acquire_timeout while others are connected, or the server cancelled it
                // (57014, statement_timeout) on a connection that stayed healthy
  reply_lost,   // the statement went out and its answer never came (connection lost, our deadline
                // passed, the server died mid-statement): it may have committed or not
  read_only,    // the statement certainly did not run: the server refused it as read-only (25006), which
                // is what a primary that became a standby (failover, switchover) answers. The server
                // is reached but not writable here: the connection is dropped and its replacement,
                // with target_session_attrs=read-write, finds the new primary.
  retryable,    // the statement changed nothing and may succeed when run again
  internal,     // anything else: unexpected SQLSTATE, unexpected result shape, bad data
};
std::string_view pg_error_kind_name(PgErrorKind kind);

struct PgError {
  PgErrorKind kind = PgErrorKind::ok;
  std::string sqlstate;  // five characters when the server sent one, else empty
  std::string message;   // for logs

  bool ok() const { return kind == PgErrorKind::ok; }
};

// SQLSTATEs the driver tells apart (PostgreSQL, Appendix A "Error Codes").
namespace sqlstate {
inline constexpr std::string_view connection_exception_class = "08";  // the whole class
inline constexpr std::string_view too_many_connections = "53300";
inline constexpr std::string_view query_canceled = "57014";
inline constexpr std::string_view admin_shutdown = "57P01";
inline constexpr std::string_view crash_shutdown = "57P02";
inline constexpr std::string_view cannot_connect_now = "57P03";         // starting up / recovering
inline constexpr std::string_view read_only_sql_transaction = "25006";  // a standby, or default_transaction_read_only
inline constexpr std::string_view unique_violation = "23505";
inline constexpr std::string_view serialization_failure = "40001";
inline constexpr std::string_view deadlock_detected = "40P01";
inline constexpr std::string_view invalid_sql_statement_name = "26000";  // no prepared statement of that name
inline constexpr std::string_view duplicate_prepared_statement = "42P05";
}  // namespace sqlstate

PgErrorKind classify_sqlstate(std::string_view code);

// The error of a result whose status is not a success. Without a SQLSTATE (libpq's own errors,
// e.g. "server closed the connection unexpectedly") the connection's status decides.
PgError error_from_result(const PGresult* result, const PGconn* connection);

}  // namespace idem::pg
