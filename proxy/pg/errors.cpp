#include "pg/errors.hpp"

namespace idem::pg {

std::string_view pg_error_kind_name(PgErrorKind kind) {
  switch (kind) {
    case PgErrorKind::ok: return "ok";
    case PgErrorKind::unavailable: return "unavailable";
    case PgErrorKind::busy: return "busy";
    case PgErrorKind::reply_lost: return "reply_lost";
    case PgErrorKind::read_only: return "read_only";
    case PgErrorKind::retryable: return "retryable";
    case PgErrorKind::internal: return "internal";
  }
  return "invalid";
}

PgErrorKind classify_sqlstate(std::string_view code) {
  if (code == sqlstate::query_canceled) return PgErrorKind::busy;
  if (code == sqlstate::read_only_sql_transaction) return PgErrorKind::read_only;
  if (code.starts_with(sqlstate::connection_exception_class) || code == sqlstate::too_many_connections ||
      code == sqlstate::admin_shutdown ||
      code == sqlstate::crash_shutdown || code == sqlstate::cannot_connect_now) {
    return PgErrorKind::unavailable;
  }
  if (code == sqlstate::unique_violation || code == sqlstate::serialization_failure ||
      code == sqlstate::deadlock_detected) {
    return PgErrorKind::retryable;
  }
  return PgErrorKind::internal;
}

PgError error_from_result(const PGresult* result, const PGconn* connection) {
  PgError error;
  const char* code = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (code != nullptr) {
    error.sqlstate = code;
    error.kind = classify_sqlstate(error.sqlstate);
  } else {
    error.kind = PQstatus(connection) == CONNECTION_OK ? PgErrorKind::internal : PgErrorKind::unavailable;
  }
  const char* message = result != nullptr ? PQresultErrorMessage(result) : "";
  error.message = (message != nullptr && *message != '\0') ? message : PQerrorMessage(connection);
  return error;
}

}  // namespace idem::pg
