#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/route.hpp"
#include "core/route_table.hpp"

namespace idem::core {
namespace {

Route make_route(std::string name, std::vector<std::string> methods, std::string path) {
  Route route;
  route.match.methods = std::move(methods);
  route.match.path = std::move(path);
  route.policy.name = std::move(name);
  return route;
}

// Name of the matched route, or "" when nothing matched.
std::string matched(const RouteTable& table, std::string_view method, std::string_view path) {
  const Route* route = table.match(method, path);
  return route ? route->policy.name : "";
}

TEST(PathMatches, LiteralPathMatchesExactly) {
  EXPECT_TRUE(path_matches("/orders", "/orders"));
  EXPECT_FALSE(path_matches("/orders", "/order"));
  EXPECT_FALSE(path_matches("/orders", "/orders/1"));
  EXPECT_FALSE(path_matches("/orders", "/Orders"));
  EXPECT_TRUE(path_matches("/", "/"));
  EXPECT_FALSE(path_matches("/", "/orders"));
}

TEST(PathMatches, TrailingSlashIsSignificant) {
  EXPECT_FALSE(path_matches("/orders", "/orders/"));
  EXPECT_FALSE(path_matches("/orders/", "/orders"));
  EXPECT_TRUE(path_matches("/orders/", "/orders/"));
}

TEST(PathMatches, ParameterMatchesOneNonEmptySegment) {
  EXPECT_TRUE(path_matches("/orders/{id}/refunds", "/orders/42/refunds"));
  EXPECT_TRUE(path_matches("/orders/{id}", "/orders/a-b.c"));
  EXPECT_FALSE(path_matches("/orders/{id}/refunds", "/orders//refunds"));
  EXPECT_FALSE(path_matches("/orders/{id}", "/orders/"));
  EXPECT_FALSE(path_matches("/orders/{id}", "/orders/42/refunds"));
  EXPECT_FALSE(path_matches("/orders/{id}", "/orders"));
}

TEST(PathMatches, WildcardMatchesTheRest) {
  EXPECT_TRUE(path_matches("/api/*", "/api"));
  EXPECT_TRUE(path_matches("/api/*", "/api/"));
  EXPECT_TRUE(path_matches("/api/*", "/api/a"));
  EXPECT_TRUE(path_matches("/api/*", "/api/a/b/c"));
  EXPECT_FALSE(path_matches("/api/*", "/apix"));
  EXPECT_FALSE(path_matches("/api/*", "/ap"));
  EXPECT_FALSE(path_matches("/api/*", "/"));
  EXPECT_TRUE(path_matches("/*", "/"));
  EXPECT_TRUE(path_matches("/*", "/anything/at/all"));
  EXPECT_TRUE(path_matches("/tenants/{t}/*", "/tenants/7/orders/1"));
  EXPECT_FALSE(path_matches("/tenants/{t}/*", "/tenants"));
}

TEST(PathMatches, QueryIsNotPartOfThePath) {
  // The caller strips the query; a '?' left in the path is an ordinary character, never a match.
  EXPECT_FALSE(path_matches("/orders", "/orders?x=1"));
  EXPECT_FALSE(path_matches("/orders?x=1", "/orders"));
}

TEST(PathMatches, NonOriginFormTargetsNeverMatch) {
  EXPECT_FALSE(path_matches("/*", "*"));
  EXPECT_FALSE(path_matches("/*", ""));
  EXPECT_FALSE(path_matches("/*", "http://example.com/"));
}

TEST(PathPatternError, ValidPatternsHaveNoError) {
  for (const char* pattern : {"/", "/orders", "/orders/", "/orders/{id}", "/orders/{order_id2}/refunds", "/api/*",
                              "/*", "/t/{t}/*", "/a.b/c-d/~e"}) {
    EXPECT_EQ(path_pattern_error(pattern), "") << pattern;
  }
}

TEST(PathPatternError, InvalidPatternsSayWhy) {
  struct Case {
    const char* pattern;
    const char* mentions;
  };
  for (const Case& c : {
           Case{"", "start with '/'"},
           Case{"orders", "start with '/'"},
           Case{"/orders?x=1", "'?' or '#'"},
           Case{"/orders#top", "'?' or '#'"},
           Case{"/orders;v=2", "';'"},
           Case{"//orders", "empty segment"},
           Case{"/orders//refunds", "empty segment"},
           Case{"/orders//", "empty segment"},
           Case{"/orders/{}", "'{}'"},
           Case{"/orders/{id", "'{id'"},
           Case{"/orders/id}", "'id}'"},
           Case{"/orders/x{id}", "'x{id}'"},
           Case{"/orders/{id}x", "'{id}x'"},
           Case{"/orders/{i-d}", "'{i-d}'"},
           Case{"/api/*/more", "'*'"},
           Case{"/api/v*", "'v*'"},
           Case{"/api/**", "'**'"},
           Case{"/api/*/", "'*'"},
       }) {
    const std::string error = path_pattern_error(c.pattern);
    EXPECT_NE(error.find(c.mentions), std::string::npos) << c.pattern << " -> \"" << error << '"';
  }
}

TEST(RouteTable, MethodListRestrictsTheRoute) {
  const RouteTable table({make_route("writes", {"POST", "PUT"}, "/orders")});
  EXPECT_EQ(matched(table, "POST", "/orders"), "writes");
  EXPECT_EQ(matched(table, "PUT", "/orders"), "writes");
  EXPECT_EQ(matched(table, "PATCH", "/orders"), "");
  EXPECT_EQ(matched(table, "post", "/orders"), "");  // methods are case-sensitive
}

// For upstreams whose router ignores case or a trailing slash: those spellings reach the same
// handler, so they must not skip the route that guards it.
TEST(RouteTable, CaseInsensitiveAndTrailingSlashRoutesMatchTheSpellingsTheirUpstreamAccepts) {
  Route loose = make_route("loose", {"POST"}, "/orders/{id}/refunds");
  loose.match.case_insensitive = true;
  loose.match.trailing_slash = true;
  const RouteTable table({loose, make_route("strict", {"POST"}, "/api/orders")});
  for (const std::string_view path : {"/orders/7/refunds", "/ORDERS/7/Refunds", "/orders/7/refunds/", "/Orders/AbC/REFUNDS/"}) {
    EXPECT_EQ(matched(table, "POST", path), "loose") << path;
  }
  EXPECT_EQ(matched(table, "POST", "/orders/7/refunds//"), "") << "one trailing slash only";
  EXPECT_EQ(matched(table, "POST", "/orders//refunds/"), "") << "a parameter still needs a segment";
  EXPECT_EQ(matched(table, "POST", "/API/orders"), "") << "the default stays case-sensitive";
  EXPECT_EQ(matched(table, "POST", "/api/orders/"), "") << "the default keeps the trailing slash significant";

  Route root = make_route("root", {}, "/");
  root.match.trailing_slash = true;
  EXPECT_TRUE(route_matches_path(root.match, "/"));
  EXPECT_FALSE(route_matches_path(root.match, "/x/"));
}

// Tomcat, Jetty and Spring serve `/orders;x` as `/orders`: the route that guards /orders guards it.
TEST(RouteTable, PathParametersCannotSkipTheRouteOfTheirPath) {
  Route loose = make_route("loose", {"POST"}, "/loose");
  loose.match.trailing_slash = true;
  const RouteTable table(
      {make_route("refunds", {"POST"}, "/orders/{id}/refunds"), make_route("orders", {"POST"}, "/orders"), loose});
  for (const std::string_view path : {"/orders;x", "/orders;jsessionid=AB12", "/orders;a=1;b=2", "/orders;"}) {
    EXPECT_EQ(matched(table, "POST", path), "orders") << path;
  }
  EXPECT_EQ(matched(table, "POST", "/orders/7;v=1/refunds;x"), "refunds");
  EXPECT_EQ(matched(table, "POST", "/orders;x/7/refunds"), "refunds");
  EXPECT_EQ(matched(table, "POST", "/orders/;jsessionid=AB12"), "")
      << "that is /orders/, which the route does not take";
  EXPECT_EQ(matched(table, "POST", "/loose/;jsessionid=AB12"), "loose");
  EXPECT_EQ(matched(table, "POST", "/orders%3Bx"), "") << "an encoded ';' is part of the name";
}

TEST(RouteTable, EmptyMethodListMatchesAnyMethod) {
  const RouteTable table({make_route("any", {}, "/orders")});
  EXPECT_EQ(matched(table, "DELETE", "/orders"), "any");
  EXPECT_EQ(matched(table, "CUSTOM", "/orders"), "any");
  EXPECT_EQ(matched(table, "DELETE", "/other"), "");
}

TEST(RouteTable, FirstMatchingRouteWins) {
  const RouteTable table({
      make_route("refunds", {"POST"}, "/orders/{id}/refunds"),
      make_route("orders-post", {"POST"}, "/orders/*"),
      make_route("orders-any", {}, "/orders/*"),
      make_route("shadowed", {"POST"}, "/orders/{id}"),
  });
  EXPECT_EQ(matched(table, "POST", "/orders/1/refunds"), "refunds");
  EXPECT_EQ(matched(table, "POST", "/orders/1"), "orders-post");
  EXPECT_EQ(matched(table, "DELETE", "/orders/1"), "orders-any");
  EXPECT_EQ(matched(table, "POST", "/invoices"), "");
}

TEST(RouteTable, EmptyTableMatchesNothing) {
  const RouteTable table;
  EXPECT_EQ(table.match("POST", "/"), nullptr);
  EXPECT_TRUE(table.routes().empty());
}

TEST(RouteTable, MatchPointsIntoTheTable) {
  const RouteTable table({make_route("a", {"POST"}, "/a"), make_route("b", {"POST"}, "/b")});
  EXPECT_EQ(table.match("POST", "/b"), &table.routes()[1]);
}

TEST(SafeMethod, OnlyGetHeadOptionsAreSafe) {
  EXPECT_TRUE(is_safe_method("GET"));
  EXPECT_TRUE(is_safe_method("HEAD"));
  EXPECT_TRUE(is_safe_method("OPTIONS"));
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE", "CONNECT", "get", "Head", "GET ", ""}) {
    EXPECT_FALSE(is_safe_method(method)) << method;
  }
}

}  // namespace
}  // namespace idem::core
