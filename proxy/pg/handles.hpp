#pragma once
// Owners of libpq handles.
#include <libpq-fe.h>

#include <memory>

namespace idem::pg {

struct PgConnDeleter {
  void operator()(PGconn* connection) const noexcept { PQfinish(connection); }
};
using ConnHandle = std::unique_ptr<PGconn, PgConnDeleter>;

struct PgResultDeleter {
  void operator()(PGresult* result) const noexcept { PQclear(result); }
};
using ResultHandle = std::unique_ptr<PGresult, PgResultDeleter>;

struct PgConninfoDeleter {
  void operator()(PQconninfoOption* options) const noexcept { PQconninfoFree(options); }
};
using ConninfoHandle = std::unique_ptr<PQconninfoOption, PgConninfoDeleter>;

}  // namespace idem::pg
