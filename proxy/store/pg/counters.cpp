#include "store/pg/counters.hpp"

namespace idem::store::pg {

PgCounters& pg_counters() {
  static PgCounters counters;
  return counters;
}

}  // namespace idem::store::pg
