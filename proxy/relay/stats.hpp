#pragma once
// What the relay has done, for metrics and the exit log line. Written on the io thread, read from
// anywhere (the admin thread renders them): relaxed atomics, totals not ordering.
#include <atomic>
#include <cstdint>

namespace idem::relay {

struct RelayStats {
  std::atomic<std::uint64_t> claims{0};  // claim statements that succeeded
  std::atomic<std::uint64_t> rows_claimed{0};
  std::atomic<std::uint64_t> published{0};         // rows settled as published (delivered + duplicate)
  std::atomic<std::uint64_t> duplicates{0};        // ...of which the sink already had (dedup hit)
  std::atomic<std::uint64_t> publish_failures{0};  // rows that failed and will be retried
  std::atomic<std::uint64_t> parked{0};            // rows this process parked (dead letters)
  std::atomic<std::uint64_t> released{0};          // rows handed back unattempted (held, sink down, shutdown)
  std::atomic<std::uint64_t> sink_unavailable{0};  // batches that found the sink unreachable
  std::atomic<std::uint64_t> source_failures{0};   // claim/settle statements that failed
  std::atomic<std::uint64_t> lease_lost{0};        // rows whose settle found another claim owning them
  std::atomic<std::uint64_t> retention_deleted{0};
  std::atomic<std::uint64_t> trace_context_dropped{0};  // malformed traceparent/tracestate not passed on
  // NATS: rows not published because the stream does not cover their subject (each also a retry).
  std::atomic<std::uint64_t> nats_subject_not_in_stream{0};
  // From the periodic backlog query.
  std::atomic<std::int64_t> backlog_waiting{0};
  std::atomic<std::int64_t> backlog_parked{0};
  std::atomic<std::int64_t> oldest_waiting_age_ms{0};
  std::atomic<std::int64_t> held_behind_parked{0};  // waiting rows of aggregates with a parked row
  std::atomic<bool> backlog_known{false};
  std::atomic<bool> sink_ready{false};
  std::atomic<bool> source_connected{false};
  // 1 synchronous, 0 asynchronous, -1 not known yet (pg/replication_watch.hpp).
  std::atomic<int> store_synchronous_replication{-1};
};

}  // namespace idem::relay
