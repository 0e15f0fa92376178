#include "store/pg/store_counters.hpp"

namespace idem::store::pg {

PgStoreCounters& pg_store_counters() {
  static PgStoreCounters counters;
  return counters;
}

}  // namespace idem::store::pg
