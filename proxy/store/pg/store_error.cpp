#include "store/pg/store_error.hpp"

namespace idem::store::pg {

using core::StoreError;
using idem::pg::PgErrorKind;

StoreError to_store_error(PgErrorKind kind) {
  switch (kind) {
    case PgErrorKind::ok: return StoreError::ok;
    case PgErrorKind::unavailable:
    case PgErrorKind::read_only:  // a primary turned standby refused it: nothing ran, and nothing can until failover
      return StoreError::unavailable;
    case PgErrorKind::busy: return StoreError::busy;
    case PgErrorKind::reply_lost: return StoreError::reply_lost;
    case PgErrorKind::retryable:  // retries exhausted: to the caller, a failure like any other
    case PgErrorKind::internal: return StoreError::internal;
  }
  return StoreError::internal;
}

}  // namespace idem::store::pg
