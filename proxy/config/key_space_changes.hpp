#pragma once
// What a reload does to the keys already stored. A record is found by (route name, host and scope
// header values, key): a reload that renames a route, changes what its scope or key is read from,
// or hands its requests to another route makes every stored key unreachable, and a retry that
// straddles the reload executes again. Pure: the config reader turns each change into a warning
// at the route (file:line:col), and the process logs each as `key_space_changed`.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/route.hpp"

namespace idem::config {

struct KeySpaceChange {
  std::string route;                       // the route as the new configuration names it (the old name when gone)
  std::optional<std::size_t> after_index;  // its index in `after`; nullopt when it is gone
  std::string change;                      // e.g. `scope.headers changed from [Authorization] to [X-Tenant-Id]`
};

// Every change from `before` to `after` (both in file order) that forgets stored keys, in the order
// of `after`'s routes, then the routes that are gone. Routes with `key: off` store nothing.
std::vector<KeySpaceChange> key_space_changes(const std::vector<core::Route>& before,
                                              const std::vector<core::Route>& after);

}  // namespace idem::config
