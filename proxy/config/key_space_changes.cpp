#include "config/key_space_changes.hpp"

#include <algorithm>
#include <string_view>

#include "config/http_syntax.hpp"
#include "core/route_table.hpp"

namespace idem::config {
namespace {

using detail::iequals;

bool stores_keys(const core::Route& route) { return route.policy.key != core::KeyRequirement::off; }

const core::Route* named(const std::vector<core::Route>& routes, std::string_view name) {
  const auto found =
      std::find_if(routes.begin(), routes.end(), [&](const core::Route& route) { return route.policy.name == name; });
  return found == routes.end() ? nullptr : &*found;
}

bool same_names(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  // The scope hashes the values in the route's order: another order is another scope.
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](const std::string& x, const std::string& y) { return iequals(x, y); });
}

std::string listed(const std::vector<std::string>& names) {
  std::string text = "[";
  for (const std::string& name : names) text += (text.size() > 1 ? ", " : "") + name;
  return text + "]";
}

bool same_match(const core::RouteMatch& a, const core::RouteMatch& b) {
  return a.path == b.path && a.host == b.host && a.methods == b.methods && a.case_insensitive == b.case_insensitive &&
         a.trailing_slash == b.trailing_slash;
}

bool reads_header(const core::RoutePolicy& policy) { return policy.key_source != core::KeySource::json; }
bool reads_body(const core::RoutePolicy& policy) { return policy.key_source != core::KeySource::header; }

// How the same route's policy changed in ways that change the record a request is stored under.
// Not key_format or min_key_length: the same key names the same record, only accepted more or
// less strictly (a key a stricter rule refuses gets a 400, never a second execution).
std::vector<std::string> policy_changes(const core::RoutePolicy& before, const core::RoutePolicy& after) {
  std::vector<std::string> changes;
  if (after.key == core::KeyRequirement::off) {
    changes.emplace_back("key turned off (its requests are proxied without stored keys)");
    return changes;
  }
  if (!same_names(before.scope_headers, after.scope_headers)) {
    changes.push_back("scope.headers changed from " + listed(before.scope_headers) + " to " +
                      listed(after.scope_headers));
  }
  // Turning the host on keeps finding the old records (the claim probes the v1 scope); off does not.
  if (before.scope_host && !after.scope_host) changes.emplace_back("scope.host turned off");
  if ((reads_header(before) || reads_header(after)) && !iequals(before.key_header, after.key_header)) {
    changes.push_back("key_header changed from " + before.key_header + " to " + after.key_header);
  }
  if (before.key_source != after.key_source) {
    changes.push_back("key_source changed from " + std::string(core::key_source_name(before.key_source)) + " to " +
                      std::string(core::key_source_name(after.key_source)));
  } else if (reads_body(after) && before.key_from_json != after.key_from_json) {
    changes.push_back("key_from_json changed from " + before.key_from_json + " to " + after.key_from_json);
  }
  return changes;
}

// A concrete path the pattern matches: each {name} and a final * stand for one segment "x".
std::string sample_path(std::string_view pattern) {
  std::string path;
  std::size_t start = 1;
  while (start <= pattern.size()) {
    const std::size_t end = std::min(pattern.find('/', start), pattern.size());
    const std::string_view segment = pattern.substr(start, end - start);
    path += '/';
    path += (segment == "*" || (segment.starts_with('{') && segment.ends_with('}'))) ? std::string("x")
                                                                                     : std::string(segment);
    start = end + 1;
  }
  return path.empty() ? "/" : path;
}

}  // namespace

std::vector<KeySpaceChange> key_space_changes(const std::vector<core::Route>& before,
                                              const std::vector<core::Route>& after) {
  std::vector<KeySpaceChange> changes;
  const core::RouteTable before_table(before);
  const core::RouteTable after_table(after);
  const auto report = [&](const std::string& route, std::optional<std::size_t> index, std::string change) {
    changes.push_back({route, index, std::move(change)});
  };

  for (std::size_t index = 0; index < after.size(); ++index) {
    const core::Route& route = after[index];
    const std::string& name = route.policy.name;
    if (const core::Route* old = named(before, name)) {
      if (stores_keys(*old)) {
        for (std::string& change : policy_changes(old->policy, route.policy)) report(name, index, std::move(change));
      }
    } else if (stores_keys(route)) {
      // A new name over an old route's match: the old route renamed (its records are keyed by name).
      for (const core::Route& old : before) {
        if (stores_keys(old) && !named(after, old.policy.name) && same_match(old.match, route.match)) {
          report(name, index, "renamed from " + old.policy.name);
        }
      }
    }
    // Requests an old route (still there) guarded that this route now takes.
    if (!stores_keys(route)) continue;
    for (const core::Route& old : before) {
      if (!stores_keys(old) || old.policy.name == name || !named(after, old.policy.name) || old.match.path.empty())
        continue;
      const std::string path = sample_path(old.match.path);
      // Hosts to try: one each route takes ("api.example.com"; "x.example.com" for "*.example.com"),
      // so a route for one host put before a catch-all is seen taking that host's requests.
      const auto sample_host = [](const std::string& pattern) {
        return pattern.starts_with("*.") ? "x" + pattern.substr(1) : pattern;
      };
      const std::vector<std::string> hosts = {sample_host(old.match.host), sample_host(route.match.host)};
      const std::vector<std::string> methods =
          old.match.methods.empty() ? std::vector<std::string>{"POST"} : old.match.methods;
      bool reported = false;
      for (const std::string& method : methods) {
        for (const std::string& host : hosts) {
          const core::Route* was = before_table.match(method, path, host);
          const core::Route* now = after_table.match(method, path, host);
          if (was != nullptr && was->policy.name == old.policy.name && now != nullptr && now->policy.name == name) {
            std::string change = "now takes requests such as ";
            change.append(method).append(" ").append(path).append(" that route ").append(old.policy.name);
            report(name, index, change + " guarded");
            reported = true;
            break;
          }
        }
        if (reported) break;
      }
    }
  }
  for (const core::Route& old : before) {
    if (!stores_keys(old) || named(after, old.policy.name)) continue;
    const bool renamed = std::any_of(after.begin(), after.end(), [&](const core::Route& route) {
      return stores_keys(route) && !named(before, route.policy.name) && same_match(old.match, route.match);
    });
    if (!renamed) report(old.policy.name, std::nullopt, "removed (its requests are no longer guarded by stored keys)");
  }
  return changes;
}

}  // namespace idem::config
