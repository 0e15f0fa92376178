#pragma once
// The command line's view of dead-lettered rows: `idemrelay --list-parked [--aggregate T/ID]`
// lists them (relay/parked_rows.hpp); `--redrive ID`, `--redrive --aggregate T/ID` and
// `--redrive-all` un-park them (attempts restart at 0, available at once) and NOTIFY the relays.
// Blocking libpq (pg/blocking_session.hpp): command line only, never on an io thread. Rows of an aggregate behind its
// parked row were never parked themselves: once the head is redriven, they follow it in order.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pg/blocking_session.hpp"
#include "relay/parked_rows.hpp"

namespace idem::relay {

struct RedriveResult {
  bool ok = false;
  std::vector<std::int64_t> ids;  // rows un-parked (empty: nothing was parked / no such parked row)
  std::string error;
};

struct RedriveAll {};
// Which parked rows: one by id, every one of an aggregate, or all.
using RedriveTarget = std::variant<std::int64_t, AggregateRef, RedriveAll>;

RedriveResult redrive(pg::BlockingSession& session, const RedriveTarget& target);

struct ListParkedResult {
  std::optional<ParkedList> list;  // nullopt: `error` says why
  std::string error;
};

ListParkedResult list_parked(pg::BlockingSession& session, const ParkedQuery& query);

}  // namespace idem::relay
