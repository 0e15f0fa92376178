#pragma once
// `idemrelay --redrive ID` / `--redrive-all`: un-park dead-lettered rows (attempts restart at 0,
// available at once) and NOTIFY the relays. Blocking libpq: command line only, never on an io
// thread. Rows of the same aggregate behind a parked row were never parked themselves: once the
// head is redriven, they follow it in order.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace idem::relay {

struct RedriveResult {
  bool ok = false;
  std::vector<std::int64_t> ids;  // rows un-parked (empty: nothing was parked / no such parked row)
  std::string error;
};

// `id` set: that row only; nullopt: every parked row.
RedriveResult redrive(const std::string& dsn, std::optional<std::int64_t> id);

}  // namespace idem::relay
