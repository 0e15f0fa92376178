#pragma once
// Request fingerprint and record scope. Both are versioned ("v1:") SHA-256 hex digests whose
// pre-image frames every field with its length, so they are stable across restarts, builds and
// machines, and no two different field sequences hash the same input.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/route.hpp"

namespace idem::fingerprint {

struct RequestFacts {
  std::string_view method;
  std::string_view path;   // concrete path, without the query
  std::string_view query;  // after '?', without it; empty when none
  // Values of the route's fingerprint_headers, in the route's order; a header sent several times
  // contributes its field values joined by ", "; an absent header contributes an "absent" marker.
  std::vector<std::pair<std::string_view, std::optional<std::string>>> headers;
  std::string_view content_type;  // decides whether the body is canonicalized as JSON
  std::string_view body;
};

// "v1:" + 64 hex. JSON bodies (application/json or any +json media type) are canonicalized with
// JCS and the route's ignore_json pointers first; a JSON-typed body that does not parse hashes as
// raw bytes (with a different tag, so raw and canonical never collide).
std::string request_fingerprint(const RequestFacts& facts, const std::vector<std::string>& ignore_json);

// Scope of a record: route name + hash of the values of the route's scope headers, in order.
// Returned as "<route>/v1:<hex>"; a route without scope headers yields "<route>/-".
std::string record_scope(std::string_view route_name,
                         const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values);

// Scope of a record on a route that scopes by the request's host: "<route>/v2:<hex>" over the
// normalized host (core::scope_host) and the scope header values. The v1 form above
// stays the scope of routes that opt out, and the legacy scope a claim also probes (records made
// before the host joined the scope keep matching during their ttl).
std::string host_scope(std::string_view route_name, std::string_view host,
                       const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values);

// The scope a request's record is claimed under on a route, and the legacy scope the claim also
// probes (empty when the route's scope has one form only). `host` is the normalized one.
struct RequestScope {
  std::string scope;
  std::string legacy_scope;
};
RequestScope request_scope(const core::RoutePolicy& policy, std::string_view host,
                           const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values);

bool is_json_media_type(std::string_view content_type);

}  // namespace idem::fingerprint
