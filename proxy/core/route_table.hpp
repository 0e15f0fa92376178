#pragma once
// Ordered route lookup: the first route whose method, host and path pattern match wins.
// Path patterns: literal segments, `{name}` matches exactly one non-empty segment, and a final
// `*` segment matches the rest of the path (zero or more segments): `/api/*` matches `/api`,
// `/api/` and `/api/a/b`. The query string is never part of the match.
// A trailing slash is significant and literal segments are case-sensitive, unless the route's
// match says `trailing_slash` / `case_insensitive` (RouteMatch). A segment's `;` parameters are
// not part of it (`/orders;v=2` is `/orders`: without_path_parameters, request_target.hpp), so a
// pattern holds no ';'.
#include <string>
#include <string_view>
#include <vector>

#include "core/route.hpp"

namespace idem::core {

class RouteTable {
 public:
  RouteTable() = default;
  explicit RouteTable(std::vector<Route> routes);

  // `path` is the normalized request target without the query string, `;` parameters and all;
  // `host` the request's Host value as sent (its port and case do not matter). Returns nullptr
  // when nothing matches (the request is then proxied without idempotency handling).
  const Route* match(std::string_view method, std::string_view path, std::string_view host = {}) const;
  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

// True when `pattern` (see above) matches `path`. Exposed for tests and config validation.
bool path_matches(std::string_view pattern, std::string_view path, bool case_insensitive = false);
// The route's pattern with its matching options.
bool route_matches_path(const RouteMatch& match, std::string_view path);
// Empty string when `pattern` is a valid path pattern, else why not (for config errors).
std::string path_pattern_error(std::string_view pattern);

// True when the Host value `host` ("API.example.com:8443", "[::1]:80") names `pattern` (lower case;
// "*.example.com": any name under example.com; empty: any host, none included).
bool host_matches(std::string_view pattern, std::string_view host);
// Empty string when `pattern` is a valid host pattern, else why not (for config errors).
std::string host_pattern_error(std::string_view pattern);
// ASCII lower case (host names are ASCII on the wire: IDNs arrive as A-labels).
std::string lower_ascii(std::string_view text);

}  // namespace idem::core
