// Fuzzes route matching (core/route_table): a request's method and path against a fixed table,
// and a fuzzed path pattern (what a config file holds) against the same path.
// Input: "METHOD\nPATH\nPATTERN" (missing parts are empty).
// Invariants: the table returns the first route whose methods and pattern match the path without
// its ';' parameters, a valid pattern matches the paths it describes, and nothing reads outside its
// input (ASan).
#include <algorithm>
#include <string>

#include "core/request_target.hpp"
#include "core/route_table.hpp"
#include "fuzz_support.hpp"

namespace {

using idem::core::path_matches;
using idem::core::Route;
using idem::core::RouteTable;

Route route(std::string name, std::vector<std::string> methods, std::string path) {
  Route r;
  r.match.methods = std::move(methods);
  r.match.path = std::move(path);
  r.policy.name = std::move(name);
  return r;
}

const RouteTable& table() {
  static const RouteTable routes({
      route("create-order", {"POST"}, "/orders"),
      route("refund", {"POST", "PUT"}, "/orders/{id}/refunds"),
      route("delete-order", {"DELETE"}, "/orders/{id}"),
      route("webhooks", {}, "/webhooks/*"),
      route("nested", {"PATCH"}, "/a/{x}/b/{y}/*"),
      route("trailing-slash", {"POST"}, "/orders/"),
      route("root", {"POST"}, "/"),
      route("catch-all", {"PUT"}, "/*"),
  });
  return routes;
}

// A path the pattern describes: every {name} segment filled in, a final '*' replaced by `tail`.
std::string instance_of(std::string_view pattern, std::string_view tail) {
  std::string path;
  std::size_t start = 1;
  while (start <= pattern.size()) {
    const std::size_t end = std::min(pattern.find('/', start), pattern.size());
    const std::string_view segment = pattern.substr(start, end - start);
    if (segment == "*" && end == pattern.size()) {
      path += tail.empty() ? "" : "/" + std::string(tail);
      return path.empty() ? "/" : path;
    }
    path += '/';
    path += segment.starts_with('{') ? "v" : std::string(segment);
    start = end + 1;
  }
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> parts = idem::fuzz::split(idem::fuzz::as_text(data, size), '\n');
  const std::string_view method = parts.size() > 0 ? parts[0] : std::string_view();
  const std::string_view path = parts.size() > 1 ? parts[1] : std::string_view();
  const std::string_view pattern = parts.size() > 2 ? parts[2] : std::string_view();
  // Parameters are not part of what a route matches (`/orders;v=2` is `/orders`).
  const std::string bare_path = idem::core::without_path_parameters(path);

  const Route* matched = table().match(method, path);
  const Route* expected = nullptr;
  for (const Route& candidate : table().routes()) {
    const auto& methods = candidate.match.methods;
    const bool method_ok = methods.empty() || std::find(methods.begin(), methods.end(), method) != methods.end();
    if (method_ok && path_matches(candidate.match.path, bare_path)) {
      expected = &candidate;
      break;
    }
  }
  IDEM_FUZZ_CHECK(matched == expected);
  if (matched != nullptr) IDEM_FUZZ_CHECK(!bare_path.empty() && bare_path.front() == '/');
  if (matched != nullptr && matched->policy.name == "create-order") IDEM_FUZZ_CHECK(bare_path == "/orders");

  // Any pattern, valid or not, is safe to match against.
  const bool pattern_matches = path_matches(pattern, bare_path);
  if (!idem::core::path_pattern_error(pattern).empty()) return 0;

  const RouteTable single({route("fuzzed", {std::string(method)}, std::string(pattern))});
  IDEM_FUZZ_CHECK((single.match(method, path) != nullptr) == pattern_matches);
  const bool has_wildcard = pattern.ends_with("/*");
  if (!has_wildcard && pattern_matches) {
    // Without a wildcard, a match has exactly as many segments as the pattern.
    IDEM_FUZZ_CHECK(std::count(bare_path.begin(), bare_path.end(), '/') ==
                    std::count(pattern.begin(), pattern.end(), '/'));
  }
  IDEM_FUZZ_CHECK(path_matches(pattern, instance_of(pattern, "")));
  if (has_wildcard) IDEM_FUZZ_CHECK(path_matches(pattern, instance_of(pattern, "x/y")));
  return 0;
}
