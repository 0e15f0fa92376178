// Fuzzes the idemproxy config loader (config/config.hpp) on arbitrary YAML text, with no
// environment (every ${VAR} is unset). The loader must never throw or crash: it returns issues.
// Invariants: a config comes back exactly when no issue is an error, every issue is located in
// the named file, and a config that comes back obeys the rules the loader promises to enforce.
#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "config/config_loader.hpp"
#include "core/route_table.hpp"
#include "fingerprint/canonical_json.hpp"
#include "fuzz_support.hpp"

namespace {

constexpr std::string_view kFileName = "fuzz.yaml";

std::optional<std::string> no_environment(std::string_view) { return std::nullopt; }

void check_route(const idem::core::Route& route, const idem::config::Config& config) {
  const idem::core::RoutePolicy& policy = route.policy;
  IDEM_FUZZ_CHECK(!policy.name.empty());
  IDEM_FUZZ_CHECK(idem::core::path_pattern_error(route.match.path).empty());
  IDEM_FUZZ_CHECK(policy.max_key_length >= 1 && policy.max_key_length <= 1024);
  IDEM_FUZZ_CHECK(!policy.key_header.empty());
  // The timing model (README "Timing"): a route that claims keys has a lease that covers its
  // longest exchange plus the margin, and a ttl past the lease (key: off claims nothing).
  if (policy.key != idem::core::KeyRequirement::off) {
    IDEM_FUZZ_CHECK(policy.ttl > policy.lease);
    const auto budget =
        idem::core::longest_exchange(idem::config::exchange_timeouts(route, config.upstreams, config.store.postgres));
    IDEM_FUZZ_CHECK(policy.lease >= idem::core::minimum_lease(budget));
  }
  for (const std::string& pointer : policy.ignore_json) {
    IDEM_FUZZ_CHECK(idem::fingerprint::json_pointer_error(pointer).empty());
  }
  for (const std::string& method : route.match.methods) {
    IDEM_FUZZ_CHECK(!method.empty());
    IDEM_FUZZ_CHECK(std::none_of(method.begin(), method.end(), [](char c) { return c >= 'a' && c <= 'z'; }));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const idem::config::LoadResult result =
      idem::config::load_config_text(idem::fuzz::as_text(data, size), kFileName, no_environment);

  bool has_error = false;
  for (const idem::config::ConfigIssue& issue : result.issues) {
    has_error = has_error || !issue.warning;
    IDEM_FUZZ_CHECK(issue.file == kFileName);
    IDEM_FUZZ_CHECK(issue.line >= 0 && issue.column >= 0);
    IDEM_FUZZ_CHECK(!issue.message.empty());
    IDEM_FUZZ_CHECK(issue.to_string().starts_with(kFileName));
  }
  IDEM_FUZZ_CHECK(result.config.has_value() != has_error);
  if (!result.config) return 0;

  std::set<std::string> names;
  for (const idem::core::Route& route : result.config->routes) {
    check_route(route, *result.config);
    IDEM_FUZZ_CHECK(names.insert(route.policy.name).second);
  }
  return 0;
}
