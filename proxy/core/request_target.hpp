#pragma once
// The request target as the upstream will see it, RFC 3986 §6 and RFC 9112 §3.2: routes are
// matched on this, and it is what is forwarded, so a spelling the upstream reads as /orders
// (`/%6Frders`, `/orders/./x/..`, `//orders`, `http://svc/orders`) cannot skip the route that
// guards /orders. Pure.
#include <optional>
#include <string>
#include <string_view>

#include "core/problem.hpp"

namespace idem::core {

struct NormalizedTarget {
  std::string target;                    // origin-form ("/path?query"), or "*" for OPTIONS *
  std::optional<std::string> authority;  // set for an absolute-form target: the Host to forward
};

// Absolute-form (http/https) becomes origin-form; in the path, percent-encoded unreserved
// characters are decoded and other percent-encodings upper-cased, dot segments are removed and
// runs of '/' become one. Refused (400, the problem): any other form, a fragment, a malformed
// percent-encoding, and what cannot be normalized safely (an encoded '/' or '\', any '\', NUL).
// The query is kept as sent. A `;` in a segment starts its parameters (`/orders;jsessionid=1`),
// which Tomcat, Jetty and Spring drop before routing; a segment whose name before them is `.`,
// `..` or empty (but for the last) reads as a dot segment or `//` to them and as a name to
// servers that keep parameters, so the two disagree on the path's shape: refused (Jetty's
// default refuses them too).
struct TargetResult {
  std::optional<NormalizedTarget> normalized;
  std::optional<Problem> problem;
};
TargetResult normalize_request_target(std::string_view target, std::string_view method);

// uri-host [ ":" port ] (RFC 9110 §7.2): a reg-name, an IPv4 address or a bracketed IP literal;
// nothing that could carry a path, user info or a second host.
bool is_valid_host_port(std::string_view authority);

// The path as Tomcat, Jetty and Spring route it: each segment without its `;` parameters
// (`/orders;v=2/7;x` is `/orders/7`, `/orders/;jsessionid=1` is `/orders/`). Routes are matched
// on it, so a spelling with parameters cannot skip the route of the path those servers serve.
// `path` is normalized (normalize_request_target) and holds no query.
std::string without_path_parameters(std::string_view path);

// The host a record's scope holds for a request whose Host is `host`: one spelling per host, so
// a retry that spells it differently is still the same request. Lower case (host names are
// case-insensitive, RFC 3986 §3.2.2), one trailing '.' of a name dropped, and no port: tenants
// are told apart by host name, while replicas and listeners on other ports share one key space.
std::string scope_host(std::string_view host);

}  // namespace idem::core
