#include "pg/counters.hpp"

namespace idem::pg {

PgCounters& pg_counters() {
  static PgCounters counters;
  return counters;
}

}  // namespace idem::pg
