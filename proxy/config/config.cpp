// Entry points of the config loader: read the file, parse the YAML, hand the document to the
// schema (config_reader.cpp) and return every issue found.
#include "config/config_loader.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config_file.hpp"
#include "config/config_reader.hpp"
#include "config/issue_sink.hpp"
#include "config/units.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config {
namespace {

// The restart-only settings of Config, each with its name: `visit(name, a's field, b's field)`.
// Config's comments mark these; a field marked there is listed here.
template <class ConfigA, class ConfigB, class Visit>
void for_each_restart_only(ConfigA& a, ConfigB& b, Visit visit) {
  visit("listen", a.listen, b.listen);
  visit("workers", a.workers, b.workers);
  visit("upstreams", a.upstreams, b.upstreams);
  visit("store", a.store, b.store);
  visit("admin", a.admin, b.admin);
  visit("replay_cache", a.replay_cache, b.replay_cache);
  visit("reaper", a.reaper, b.reaper);
}

}  // namespace

std::vector<std::string> restart_only_changes(const Config& before, const Config& after) {
  std::vector<std::string> changed;
  for_each_restart_only(before, after, [&](std::string_view name, const auto& old_value, const auto& new_value) {
    if (old_value != new_value) changed.emplace_back(name);
  });
  return changed;
}

Config keep_restart_only(Config next, const Config& running) {
  for_each_restart_only(next, running, [](std::string_view, auto& field, const auto& current) { field = current; });
  return next;
}

namespace {
// How the file names a setting of `upstream`: upstream.timeout for the only one, upstreams.<name>.timeout.
std::string upstream_setting(const UpstreamConfig& upstream, std::string_view setting, bool only) {
  return (only ? std::string("upstream.") : "upstreams." + upstream.name + ".") + std::string(setting);
}
}  // namespace

core::ExchangeTimeouts exchange_timeouts(const UpstreamConfig& upstream, const PostgresConfig& postgres) {
  const bool only = upstream.name == "default";
  return {.store_query = postgres.query_timeout,
          .store_acquire = postgres.acquire_timeout,
          .connect = upstream.connect_timeout,
          .upstream_tls = upstream.tls.enabled,
          .upstream = upstream.timeout,
          .connect_setting = upstream_setting(upstream, "connect_timeout", only),
          .upstream_setting = upstream_setting(upstream, "timeout", only)};
}

core::ExchangeTimeouts exchange_timeouts(const core::Route& route, const std::vector<UpstreamConfig>& upstreams,
                                         const PostgresConfig& postgres) {
  // By name: on a reload or --against, the index was resolved against the running upstreams, which
  // `upstreams` (the file's) may list in another order.
  const auto named = std::find_if(upstreams.begin(), upstreams.end(), [&](const UpstreamConfig& upstream) {
    return upstream.name == route.forwarding.upstream;
  });
  const UpstreamConfig& upstream =
      route.forwarding.upstream.empty() || named == upstreams.end() ? upstreams.front() : *named;
  core::ExchangeTimeouts timeouts = exchange_timeouts(upstream, postgres);
  if (route.forwarding.timeout) {
    timeouts.upstream = *route.forwarding.timeout;
    timeouts.upstream_setting = "routes[" + route.policy.name + "].timeout";
  }
  return timeouts;
}

std::chrono::milliseconds longest_upstream_timeout(const Config& config) {
  std::chrono::milliseconds longest{0};
  for (const UpstreamConfig& upstream : config.upstreams) longest = std::max(longest, upstream.timeout);
  for (const core::Route& route : config.routes)
    longest = std::max(longest, route.forwarding.timeout.value_or(longest));
  return longest;
}

std::string describe_duration(std::chrono::milliseconds value) { return detail::format_duration(value); }

std::string describe_budget(const core::ExchangeBudget& budget, bool with_margin) {
  using detail::format_duration;
  const auto total = with_margin ? core::minimum_lease(budget) : budget.total;
  std::string text = format_duration(total) + " =";
  const char* separator = " ";
  for (const core::BudgetTerm& term : budget.terms) {
    text += separator;
    if (term.count != 1) text += std::to_string(term.count) + " × ";
    text += term.setting + " " + format_duration(term.each);
    separator = " + ";
  }
  if (with_margin) text += " + margin " + format_duration(core::kLeaseMargin);
  return text;
}

core::ExchangeBudget longest_exchange_of(const Config& config) {
  core::ExchangeBudget longest;
  const auto consider = [&](const core::ExchangeTimeouts& timeouts) {
    core::ExchangeBudget budget = core::longest_exchange(timeouts);
    if (budget.total > longest.total || longest.terms.empty()) longest = std::move(budget);
  };
  for (const UpstreamConfig& upstream : config.upstreams) consider(exchange_timeouts(upstream, config.store.postgres));
  for (const core::Route& route : config.routes)
    consider(exchange_timeouts(route, config.upstreams, config.store.postgres));
  return longest;
}

std::string ConfigIssue::to_string() const {
  std::string text = file;
  if (line > 0) text += ":" + std::to_string(line) + ":" + std::to_string(column);
  text += ": ";
  if (warning) text += "warning: ";
  text += message;
  return text;
}

EnvLookup process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const std::string variable(name);
    // Config loads at start-up, before any thread that could call setenv exists.
    if (const char* value = std::getenv(variable.c_str())) return std::string(value);
    return std::nullopt;
  };
}

LoadResult load_config_text(std::string_view yaml, std::string_view file_name, const EnvLookup& env,
                            const Config* running) {
  return detail::load_config_text_with<LoadResult>(yaml, file_name, env,
                                                   [running](const YAML::Node& document, detail::YamlReader& reader) {
                                                     return detail::read_config(document, reader, running);
                                                   });
}

LoadResult load_config_file(const std::string& path, const EnvLookup& env, const Config* running) {
  return detail::load_config_file_with<LoadResult>(
      path, [&](std::string_view text) { return load_config_text(text, path, env, running); });
}

}  // namespace idem::config
