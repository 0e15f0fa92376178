#pragma once
// Process-wide counters of the driver (every Pool and Connection in the process), for tests
// (round trips per operation) and metrics. Relaxed atomics: totals, not ordering.
#include <atomic>
#include <cstdint>

namespace idem::pg {

struct PgCounters {
  // Statements sent, i.e. round trips: a prepare pipelined with the statement's first execution
  // counts once, a statement sent again after its session lost it counts twice.
  std::atomic<std::uint64_t> statements_sent{0};
  std::atomic<std::uint64_t> statements_prepared{0};       // named prepares sent (once per statement per session)
  std::atomic<std::uint64_t> prepared_statements_lost{0};  // executions refused with 26000, then run unnamed
  std::atomic<std::uint64_t> connects_succeeded{0};
  std::atomic<std::uint64_t> connects_failed{0};
  std::atomic<std::uint64_t> query_timeouts{0};
  std::atomic<std::uint64_t> acquire_waits{0};     // statements that queued for a busy pool
  std::atomic<std::uint64_t> acquire_timeouts{0};  // ... and gave up after acquire_timeout
};

PgCounters& pg_counters();

}  // namespace idem::pg
