#pragma once
// The Nats-Msg-Id of an outbox event, and when a message of an earlier version, which used the
// bare outbox id, may still be in the stream's duplicate window.
//
// The id names the event, not its row: "<event_id>:<event_fingerprint>" (event_fingerprint.hpp,
// what the Redis sink's marker holds). Outbox ids are reused (two databases relaying into one
// stream both start at 1; TRUNCATE ... RESTART IDENTITY; a restore; a failover that lost the
// sequence's tail), and JetStream answers a repeated Nats-Msg-Id within its window "duplicate":
// with the bare id a new event was settled as published and never stored.
//
// Upgrading: a relay of an earlier version may have published a row under its bare id and stopped
// before marking it. That copy stays deduplicable for one window after it was stored, i.e. at most
// one window after this process started (the old relays are stopped before new ones start). So
// while that lasts, and if the stream stored anything within a window before the start, a row
// created before this process started (plus half a second: created_at is the database's clock) is
// first probed under its bare id: a publish JetStream refuses unless it is a duplicate
// (Nats-Expected-Last-Sequence set to a value no stream reaches; the server checks Nats-Msg-Id
// first). "Duplicate" points at the stored copy, which is read back: byte for byte this row's
// message -> `duplicate`, no second copy; anything else (another database's event with the same
// id) -> published under the new id.
#include <chrono>
#include <cstdint>
#include <string>

#include "relay/outbox_row.hpp"

namespace idem::relay {

// "<id>:<64 hex>".
std::string nats_message_id(const OutboxRow& row);
// The id an earlier version used: the bare outbox id.
std::string legacy_nats_message_id(const OutboxRow& row);

// The database's clock may run a little ahead of ours: rows created that little after our start are
// probed too. (An old relay stopped before this one started, so its rows are older than our start
// by that gap as well.) Every row probed costs a round trip per max_in_flight of them: keep it small.
inline constexpr std::chrono::milliseconds kCreatedAtSkewAllowance{500};

// Whether any copy under a bare id can still be in the window at all: the stream stored a message
// less than one `window` before this process started (`last_stored_micros`, 0 for an empty stream).
// When not, nothing is probed: a relay started on a quiet or new stream pays nothing.
bool earlier_copies_possible(std::int64_t last_stored_micros, std::int64_t started_micros,
                             std::chrono::milliseconds window);

// Whether a row may have a copy under its bare id inside the window: this process started less
// than one `window` ago and the row was created before it started (+ the allowance). Times are
// Unix epoch microseconds.
bool may_have_legacy_copy(std::int64_t created_at_micros, std::int64_t started_micros, std::int64_t now_micros,
                          std::chrono::milliseconds window);

}  // namespace idem::relay
