// Request-target normalization, RFC 3986 §6 and RFC 9112 §3.2.
#include <gtest/gtest.h>

#include <string>

#include "core/request_target.hpp"

namespace idem::core {
namespace {

std::string normalized(std::string_view target, std::string_view method = "POST") {
  const TargetResult result = normalize_request_target(target, method);
  // "the request is invalid: <why>" -> "400 <why>"
  if (result.problem)
    return std::to_string(result.problem->status) + " " +
           result.problem->detail.substr(result.problem->detail.find(": ") + 2);
  return result.normalized->target + (result.normalized->authority ? " @" + *result.normalized->authority : "");
}

TEST(RequestTarget, SpellingsOfOnePathBecomeThatPath) {
  EXPECT_EQ(normalized("/orders"), "/orders");
  EXPECT_EQ(normalized("/orders?x=%2F&y"), "/orders?x=%2F&y") << "the query is kept as sent";
  EXPECT_EQ(normalized("/%6Frders"), "/orders");
  EXPECT_EQ(normalized("/%6frders/%7e%2D"), "/orders/~-");
  EXPECT_EQ(normalized("/orders/%c3%a9"), "/orders/%C3%A9");
  EXPECT_EQ(normalized("/x/../orders"), "/orders");
  EXPECT_EQ(normalized("/x/%2e%2e/orders"), "/orders");
  EXPECT_EQ(normalized("/../../orders"), "/orders");
  EXPECT_EQ(normalized("/./orders/."), "/orders/");
  EXPECT_EQ(normalized("/orders/./"), "/orders/");
  EXPECT_EQ(normalized("//orders"), "/orders");
  EXPECT_EQ(normalized("/orders//42///refunds"), "/orders/42/refunds");
  EXPECT_EQ(normalized("/"), "/");
  EXPECT_EQ(normalized("/.."), "/");
}

// A target already normal comes back as it came (the common case takes a shortcut); each thing
// that makes a path not normal, even once among plain segments, still sends it through the
// normalizer. Dots inside or leading a segment's name, and anything in the query, are normal.
TEST(RequestTarget, ATargetAlreadyNormalComesBackAsItCameAndAnyOtherIsNormalized) {
  for (const std::string_view target :
       {"/orders", "/v1/orders/42/", "/.well-known/x", "/a.b/c.", "/a/..b/.c", "/orders/?q=/./..//%2F"}) {
    EXPECT_EQ(normalized(target), target);
  }
  EXPECT_EQ(normalized("/v1/orders/./42"), "/v1/orders/42");
  EXPECT_EQ(normalized("/v1/orders/../42"), "/v1/42");
  EXPECT_EQ(normalized("/v1/orders//42"), "/v1/orders/42");
  EXPECT_EQ(normalized("/v1/orders/%34%32"), "/v1/orders/42");
  EXPECT_EQ(normalized("/v1/orders/42/."), "/v1/orders/42/");
  EXPECT_TRUE(normalized("/v1/orders\\42").starts_with("400 ")) << normalized("/v1/orders\\42");
}

TEST(RequestTarget, AbsoluteFormBecomesOriginFormWithItsAuthority) {
  EXPECT_EQ(normalized("http://svc/orders"), "/orders @svc");
  EXPECT_EQ(normalized("HTTPS://svc:8443/%6Frders?a=1"), "/orders?a=1 @svc:8443");
  EXPECT_EQ(normalized("http://svc"), "/ @svc");
  EXPECT_EQ(normalized("http://svc?q"), "/?q @svc");
  EXPECT_EQ(normalized("http://u@svc/orders"), "400 the request target's authority is not host[:port]");
  EXPECT_EQ(normalized("ftp://svc/orders"),
            "400 the request target must be an absolute path, or an absolute http or https URI");
  EXPECT_EQ(normalized("svc:443", "CONNECT"),
            "400 the request target must be an absolute path, or an absolute http or https URI");
}

TEST(RequestTarget, WhatCannotBeNormalizedSafelyIsRefused) {
  for (const std::string_view target : {"/orders%2Fx", "/orders%2fx", "/orders%5Cx", "/orders%00", "/orders\\x"}) {
    EXPECT_TRUE(normalized(target).starts_with("400 the request path holds")) << target << ": " << normalized(target);
  }
  for (const std::string_view target : {"/orders%", "/orders%4", "/orders%zz"}) {
    EXPECT_EQ(normalized(target), "400 the request path holds a malformed percent-encoding") << target;
  }
  EXPECT_EQ(normalized("/orders#frag"), "400 the request target carries a fragment");
  EXPECT_EQ(normalized("*", "OPTIONS"), "*");
  EXPECT_EQ(normalized("*"), "400 the request target * is for OPTIONS only");
}

// `;` parameters stay in the forwarded target (an upstream may read them: Spring's matrix
// variables); a dot segment or an inner empty segment carrying them is refused, since servers that
// drop parameters (Tomcat: `/..;/admin` is `/../admin`) and servers that keep them read two paths.
TEST(RequestTarget, PathParametersAreKeptUnlessTheyMakeTheShapeOfThePathAmbiguous) {
  for (const std::string_view target :
       {"/orders;x", "/orders;jsessionid=AB12?q=1", "/orders/;jsessionid=AB12", "/orders;v=2/7;x/refunds", "/;x"}) {
    EXPECT_EQ(normalized(target), target);
  }
  EXPECT_EQ(normalized("/a/b;x/../c"), "/a/c");
  EXPECT_EQ(normalized("/%6Frders;x"), "/orders;x");
  EXPECT_EQ(normalized("/orders%3bx"), "/orders%3Bx") << "an encoded ';' is a character of the name";
  for (const std::string_view target : {"/orders/..;x/admin", "/..;/orders", "/.;x/orders", "/orders/.;x", "/;x/orders",
                                        "/x//;y/orders", "/orders/%2e%2e;x/y", "http://svc/..;/orders"}) {
    EXPECT_EQ(normalized(target),
              "400 the request path holds a '.', '..' or empty segment with ';' parameters, which servers read "
              "differently")
        << target;
  }
}

TEST(PathParameters, EachSegmentLosesItsParametersAsTomcatJettyAndSpringRouteIt) {
  EXPECT_EQ(without_path_parameters("/orders"), "/orders");
  EXPECT_EQ(without_path_parameters("/orders;x"), "/orders");
  EXPECT_EQ(without_path_parameters("/orders;v=2/7;a=b;c/refunds"), "/orders/7/refunds");
  EXPECT_EQ(without_path_parameters("/orders/;jsessionid=AB12"), "/orders/");
  EXPECT_EQ(without_path_parameters("/;x"), "/");
  EXPECT_EQ(without_path_parameters("/orders;"), "/orders");
}

TEST(ScopeHost, OneSpellingPerHost) {
  EXPECT_EQ(scope_host("Tenant-A.API.test"), "tenant-a.api.test");
  EXPECT_EQ(scope_host("tenant-a.api.test:8443"), "tenant-a.api.test");
  EXPECT_EQ(scope_host("tenant-a.api.test."), "tenant-a.api.test");
  EXPECT_EQ(scope_host("tenant-a.api.test.:443"), "tenant-a.api.test");
  EXPECT_EQ(scope_host("[2001:DB8::1]:8080"), "[2001:db8::1]");
  EXPECT_EQ(scope_host("[::1]"), "[::1]");
  EXPECT_EQ(scope_host("127.0.0.1:8080"), "127.0.0.1");
  EXPECT_EQ(scope_host(""), "");
  EXPECT_NE(scope_host("tenant-a.api.test"), scope_host("tenant-b.api.test"));
}

}  // namespace
}  // namespace idem::core
