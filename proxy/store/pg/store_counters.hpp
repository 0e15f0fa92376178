#pragma once
// Process-wide counters of the Postgres record store, beside the driver's (pg/counters.hpp), for
// tests (the claim race) and later for metrics. Relaxed atomics: totals, not ordering.
#include <atomic>
#include <cstdint>

namespace idem::store::pg {

struct PgStoreCounters {
  std::atomic<std::uint64_t> claim_reruns{0};  // claims run again after returning no row (the race)
};

PgStoreCounters& pg_store_counters();

}  // namespace idem::store::pg
