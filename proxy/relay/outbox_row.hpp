#pragma once
// One claimed outbox row, as the sinks see it.
#include <cstdint>
#include <string>

namespace idem::relay {

struct OutboxRow {
  std::int64_t id = 0;  // the event_id downstream: stable across re-publishes
  std::string aggregate_type;
  std::string aggregate_id;
  std::string event_type;
  std::string payload;                 // JSON text (jsonb as Postgres prints it)
  std::string headers;                 // JSON object text
  std::string created_at;              // RFC 3339, UTC, microseconds: "2026-01-02T03:04:05.123456Z"
  std::int64_t created_at_micros = 0;  // Unix epoch microseconds (for the commit-to-publish lag)
  std::int32_t attempts = 0;           // failed publishes before this claim
  // W3C trace context from headers.traceparent/tracestate, copied to the stream entry and the
  // webhook; empty when absent or dropped as malformed (Relay checks them once claimed).
  std::string traceparent;
  std::string tracestate;
  std::int32_t lane = 0;  // the aggregate's lane (002_lanes.sql): the settle re-versions it
};

}  // namespace idem::relay
