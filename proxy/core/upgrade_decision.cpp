#include "core/upgrade_decision.hpp"

#include <algorithm>

#include "core/ascii.hpp"

namespace idem::core {
namespace {

// Calls `each(element)` for every non-empty element of a comma-separated list, trimmed.
template <class Each>
void for_each_element(std::string_view list, Each each) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view element = ascii::trim_ows(list.substr(0, comma));
    if (!element.empty()) each(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

bool list_has(std::string_view list, std::string_view name) {
  bool found = false;
  for_each_element(list, [&](std::string_view element) { found = found || ascii::iequals(element, name); });
  return found;
}

bool names_one_of(std::string_view element, const std::vector<std::string>& names) {
  const std::string_view name = upgrade_protocol_name(element);
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& allowed) { return ascii::iequals(allowed, name); });
}

bool is_guarded(const RoutePolicy* route, bool key_header_sent, BodyHandling handling) {
  if (route == nullptr) return false;
  switch (route->key) {
    case KeyRequirement::off: return false;
    case KeyRequirement::required: return true;
    case KeyRequirement::optional: return key_header_sent || handling == BodyHandling::read_whole;
  }
  return true;
}

}  // namespace

std::string_view upgrade_protocol_name(std::string_view element) {
  element = ascii::trim_ows(element);
  return ascii::trim_ows(element.substr(0, element.find('/')));
}

UpgradeDecision decide_upgrade(const UpgradeOffer& offer, const RoutePolicy* route, bool key_header_sent,
                               BodyHandling handling) {
  UpgradeDecision decision;
  // RFC 9110 §7.8: an HTTP/1.0 request's Upgrade is ignored, and a sender lists "upgrade" in
  // Connection (without it, Upgrade is a field some proxy before us failed to strip).
  if (offer.upgrade.empty() || offer.version < 11 || !list_has(offer.connection, "upgrade")) return decision;
  std::vector<std::string_view> offered;
  for_each_element(offer.upgrade, [&](std::string_view element) {
    if (!ascii::iequals(upgrade_protocol_name(element), kNeverUpgraded)) offered.push_back(element);
  });
  if (offered.empty()) return decision;

  const std::string what = std::string(upgrade_protocol_name(offered.front()));
  if (is_guarded(route, key_header_sent, handling)) {
    decision.action = UpgradeAction::refuse;
    const std::string why = route->key == KeyRequirement::required
                                ? "requires an idempotency key"
                                : "guards requests that carry an idempotency key, as this one does";
    decision.refusal =
        upgrade_refused_problem("route \"" + route->name + "\" " + why + ": a request it guards is never upgraded (" +
                                what + "); serve the upgrade on a route with key: off or optional");
    return decision;
  }
  const std::vector<std::string>& allowed = route != nullptr ? route->upgrades : kUnroutedUpgrades;
  for (const std::string_view element : offered) {
    if (!names_one_of(element, allowed)) continue;
    if (!decision.protocols.empty()) decision.protocols += ", ";
    decision.protocols += element;
  }
  if (decision.protocols.empty()) {
    decision.action = UpgradeAction::refuse;
    std::string listed;
    for (const std::string& name : allowed) listed += (listed.empty() ? "" : ", ") + name;
    decision.refusal =
        upgrade_refused_problem("an upgrade to " + what + " is not allowed " +
                                (route != nullptr ? "on route \"" + route->name + "\" (its upgrades: [" + listed + "])"
                                                  : "for a request no route matches (only " + listed + ")"));
    return decision;
  }
  decision.action = UpgradeAction::forward;
  return decision;
}

bool switch_accepted(std::string_view offered, std::string_view answered) {
  bool any = false;
  bool all_offered = true;
  for_each_element(answered, [&](std::string_view element) {
    any = true;
    bool found = false;
    for_each_element(offered, [&](std::string_view mine) {
      found = found || ascii::iequals(upgrade_protocol_name(mine), upgrade_protocol_name(element));
    });
    all_offered = all_offered && found;
  });
  return any && all_offered;
}

}  // namespace idem::core
