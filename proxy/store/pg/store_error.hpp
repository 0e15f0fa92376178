#pragma once
// The driver's error kinds as the Store API reports them.
#include "core/store_error.hpp"
#include "pg/errors.hpp"

namespace idem::store::pg {

// `retryable` here means retries ran out, which the caller cannot act on.
core::StoreError to_store_error(idem::pg::PgErrorKind kind);

}  // namespace idem::store::pg
