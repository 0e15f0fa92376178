#include "core/body_handling.hpp"

#include "core/key_source.hpp"

namespace idem::core {

BodyHandling body_handling(const RoutePolicy* route, std::string_view method, bool key_header_sent) {
  if (route == nullptr || is_safe_method(method) || route->key == KeyRequirement::off) return BodyHandling::streamed;
  // A keyless request on an optional route is proxied plainly, unless the route may find its key
  // in the body: only reading the body tells.
  const bool keyless_optional = route->key == KeyRequirement::optional && !key_header_sent &&
                                key_origin(route->key_source, false) == KeyOrigin::header;
  return keyless_optional ? BodyHandling::streamed : BodyHandling::read_whole;
}

}  // namespace idem::core
