#pragma once
// What the operator commands (--inspect/--release) and the admin API share: naming a record the
// way the proxy does, and showing it.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/route.hpp"
#include "store/store.hpp"

namespace idem::app {

using HeaderPairs = std::vector<std::pair<std::string, std::string>>;

// The record scope a request carrying `headers` to `host` (its Host, as sent) gets on this route,
// exactly as the proxy computes it (the route's scope headers, case-insensitive, repeated values
// joined by ", "; the host normalized, when the route scopes by it). Nullopt when the route
// scopes by host and none is given: the caller asks for it.
std::optional<std::string> scope_for(const core::RoutePolicy& policy, const HeaderPairs& headers,
                                     std::optional<std::string_view> host);

// The record as one JSON object (no stored headers or body).
std::string record_json(std::string_view route, std::string_view scope, std::string_view key,
                        const store::RecordInfo& info);

}  // namespace idem::app
