// What a reload does to stored keys: the comparison, and the warnings --check --against and a
// reload print at each route (file:line:col).
#include "config/key_space_changes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "config_test_support.hpp"

namespace idem::config {
namespace {

using test::all_issues;
using test::load;

core::Route route(std::string name, std::string path, std::vector<std::string> scope = {"X-Tenant-Id"}) {
  core::Route r;
  r.policy.name = std::move(name);
  r.match.methods = {"POST"};
  r.match.path = std::move(path);
  r.policy.scope_headers = std::move(scope);
  return r;
}

std::vector<std::string> described(const std::vector<KeySpaceChange>& changes) {
  std::vector<std::string> text;
  for (const KeySpaceChange& change : changes) text.push_back(change.route + ": " + change.change);
  return text;
}

TEST(KeySpaceChanges, NothingThatKeepsEveryStoredKeyReachableIsReported) {
  const std::vector<core::Route> before = {route("orders", "/orders"), route("refunds", "/orders/{id}/refunds")};
  std::vector<core::Route> after = before;
  after[0].policy.ttl = std::chrono::hours(48);                          // how long, not where
  after[0].policy.scope_headers = {"x-tenant-id"};                       // header names are case-insensitive
  after[1].policy.fingerprint_headers = {"Content-Type", "X-Currency"};  // the fingerprint is not the key space
  after.push_back(route("new", "/new"));                                 // a new route stored nothing yet
  after[0].policy.scope_host = true;
  EXPECT_TRUE(key_space_changes(before, after).empty())
      << testing::PrintToString(described(key_space_changes(before, after)));
  // Turning the host on keeps finding the records made without it (the claim probes the v1 scope).
  std::vector<core::Route> hostless = before;
  hostless[0].policy.scope_host = false;
  EXPECT_TRUE(key_space_changes(hostless, before).empty());
}

// Routes that match on Host: a route for one host put before a catch-all takes that host's
// requests (and their stored keys); two routes that differ only by host are not a rename.
TEST(KeySpaceChanges, ARouteForOneHostThatTakesACatchAllsRequestsIsNamed) {
  const std::vector<core::Route> before = {route("orders", "/orders")};
  std::vector<core::Route> after = {route("orders-eu", "/orders"), route("orders", "/orders")};
  after[0].match.host = "*.eu.example.com";
  EXPECT_EQ(described(key_space_changes(before, after)),
            std::vector<std::string>{"orders-eu: now takes requests such as POST /orders that route orders guarded"});

  std::vector<core::Route> hosted = {route("orders", "/orders")};
  hosted[0].match.host = "api.example.com";
  const std::vector<core::Route> other_host = {route("orders-v2", "/orders")};
  const std::vector<std::string> changes = described(key_space_changes(hosted, other_host));
  EXPECT_EQ(std::count_if(changes.begin(), changes.end(),
                          [](const std::string& change) { return change.find("renamed") != std::string::npos; }),
            0)
      << testing::PrintToString(changes);
}

TEST(KeySpaceChanges, RenamesScopeAndKeyChangesAreNamedPerRoute) {
  const std::vector<core::Route> before = {route("orders", "/orders", {"Authorization"}), route("refunds", "/refunds"),
                                           route("events", "/events"), route("gone", "/gone")};
  std::vector<core::Route> after = {route("create-order", "/orders", {"Authorization"}),
                                    route("refunds", "/refunds", {"X-Tenant-Id", "Authorization"}),
                                    route("events", "/events")};
  after[1].policy.scope_host = false;
  after[2].policy.key_from_json = "/id";
  after[2].policy.key_source = core::KeySource::header_then_json;
  after[2].policy.key_header = "webhook-id";
  const std::vector<KeySpaceChange> changes = key_space_changes(before, after);
  EXPECT_EQ(described(changes), (std::vector<std::string>{
                                    "create-order: renamed from orders",
                                    "refunds: scope.headers changed from [X-Tenant-Id] to [X-Tenant-Id, Authorization]",
                                    "refunds: scope.host turned off",
                                    "events: key_header changed from Idempotency-Key to webhook-id",
                                    "events: key_source changed from header to header_then_json",
                                    "gone: removed (its requests are no longer guarded by stored keys)",
                                }));
  EXPECT_EQ(changes[0].after_index, 0u);
  EXPECT_EQ(changes[3].after_index, 2u);
  EXPECT_EQ(changes[5].after_index, std::nullopt);

  // The pointer alone, under the same source.
  std::vector<core::Route> moved = after;
  moved[2].policy.key_from_json = "/data/id";
  EXPECT_EQ(described(key_space_changes(after, moved)),
            (std::vector<std::string>{"events: key_from_json changed from /id to /data/id"}));
}

TEST(KeySpaceChanges, ARouteThatNowTakesAnotherRoutesRequestsIsNamed) {
  const std::vector<core::Route> before = {route("orders", "/orders/{id}"), route("all", "/*")};
  // A new route before them takes /orders/x; "all" still guards the rest.
  const std::vector<core::Route> after = {route("orders-v2", "/orders/*"), route("orders", "/orders/{id}"),
                                          route("all", "/*")};
  EXPECT_EQ(
      described(key_space_changes(before, after)),
      (std::vector<std::string>{"orders-v2: now takes requests such as POST /orders/x that route orders guarded"}));
  // Moved behind a catch-all, the route's requests go to the catch-all.
  const std::vector<core::Route> shadowed = {route("all", "/*"), route("orders", "/orders/{id}")};
  EXPECT_EQ(described(key_space_changes(before, shadowed)),
            (std::vector<std::string>{"all: now takes requests such as POST /orders/x that route orders guarded"}));
}

TEST(KeySpaceChanges, RoutesWithoutKeysStoreNothingToForget) {
  std::vector<core::Route> before = {route("plain", "/plain")};
  before[0].policy.key = core::KeyRequirement::off;
  std::vector<core::Route> after = {route("renamed-plain", "/plain", {"Authorization"})};
  after[0].policy.key = core::KeyRequirement::off;
  EXPECT_TRUE(key_space_changes(before, after).empty());
  // Turning keys off on a route that stored them forgets them.
  const std::vector<core::Route> keyed = {route("orders", "/orders")};
  std::vector<core::Route> unkeyed = keyed;
  unkeyed[0].policy.key = core::KeyRequirement::off;
  EXPECT_EQ(described(key_space_changes(keyed, unkeyed)),
            (std::vector<std::string>{"orders: key turned off (its requests are proxied without stored keys)"}));
}

// Loaded over a running (or --against) configuration, each change is a warning at the route.
TEST(KeySpaceChanges, EachChangeIsAWarningAtItsRouteWhenLoadedOverTheRunningConfig) {
  const LoadResult running = load(R"yaml(store: { postgres: { dsn: x } }
routes:
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [Authorization] }
  - name: old-name
    match: { method: POST, path: /refunds }
    scope: { headers: [X-Tenant-Id] }
)yaml");
  ASSERT_TRUE(running.config) << all_issues(running);
  const LoadResult next = load_config_text(R"yaml(store: { postgres: { dsn: x } }
routes:
  - name: orders
    match: { method: POST, path: /orders }
    scope: { headers: [X-Tenant-Id] }
  - name: refunds
    match: { method: POST, path: /refunds }
    scope: { headers: [X-Tenant-Id] }
)yaml",
                                           "next.yaml", test::fake_env(), &*running.config);
  ASSERT_TRUE(next.config) << all_issues(next);
  EXPECT_EQ(
      all_issues(next),
      "next.yaml:3:5: warning: route \"orders\" scope.headers changed from [Authorization] to [X-Tenant-Id]: keys "
      "stored before are not found any more, so retries that straddle the change execute again\n"
      "next.yaml:6:5: warning: route \"refunds\" renamed from old-name: keys stored before are not found any "
      "more, so retries that straddle the change execute again\n");
  // Without a running configuration (a plain --check, a start) there is nothing to compare.
  EXPECT_TRUE(load_config_text("store: { postgres: { dsn: x } }\n", "next.yaml", test::fake_env()).issues.empty());
}

}  // namespace
}  // namespace idem::config
