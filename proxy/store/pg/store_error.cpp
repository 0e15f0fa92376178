#include "store/pg/store_error.hpp"

namespace idem::store::pg {

using core::StoreError;
using idem::pg::PgErrorKind;

StoreError to_store_error(PgErrorKind kind) {
  switch (kind) {
    case PgErrorKind::ok: return StoreError::ok;
    case PgErrorKind::unavailable: return StoreError::unavailable;
    case PgErrorKind::busy:
    // A primary being demoted (or a standby reached through a stale address) refused it: nothing
    // ran, but a connection was made, so fail_open does not apply: a claim fails closed, 503.
    case PgErrorKind::read_only: return StoreError::busy;
    case PgErrorKind::reply_lost: return StoreError::reply_lost;
    case PgErrorKind::retryable:  // retries exhausted: to the caller, a failure like any other
    case PgErrorKind::internal: return StoreError::internal;
  }
  return StoreError::internal;
}

}  // namespace idem::store::pg
