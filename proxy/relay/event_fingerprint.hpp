#pragma once
// What identifies an outbox event beyond its id, for the Redis dedup marker: ids can be reused
// (a database restored to an earlier point, a table recreated, two databases sharing one Redis),
// so "a marker for this id exists" must also mean "for this very event".
#include <string>

#include "relay/outbox_row.hpp"

namespace idem::relay {

// SHA-256 over the row's creation instant, aggregate, event type, payload and headers (each
// length-prefixed), hex: equal for re-publishes of one row, different for another event that got
// the same id (unless it was created in the same microsecond with the same content: then it is
// the same event as far as a consumer can tell).
std::string event_fingerprint(const OutboxRow& row);

}  // namespace idem::relay
