#pragma once
// Whether a request's offer to switch protocols (Upgrade, RFC 9110 §7.8) goes upstream, decided
// from its head and its route before anything is sent: passed on (the connection becomes a byte
// tunnel if the upstream answers 101, http/streamed_forwarding.hpp), ignored (the Upgrade field is
// stripped as any hop-by-hop field and the request goes on as a plain one), or refused (403
// problem+json, nothing sent upstream). And whether an upstream's 101 switched to a protocol the
// request offered.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/body_handling.hpp"
#include "core/problem.hpp"
#include "core/route.hpp"

namespace idem::core {

// The protocols a request no route matches may switch to.
inline const std::vector<std::string> kUnroutedUpgrades = {"websocket"};

// HTTP/2 over cleartext: never passed on (the proxy speaks HTTP/1.1 to its upstream); its offer is
// stripped and the request answered in HTTP/1.1, as RFC 9113 §3.1's client expects of a server
// that ignores it. A route may not list it.
inline constexpr std::string_view kNeverUpgraded = "h2c";

// The head's view of an offer.
struct UpgradeOffer {
  std::string_view upgrade;     // every Upgrade line joined with ", "; empty: none
  std::string_view connection;  // every Connection line joined with ", "
  unsigned version = 11;        // 10 for HTTP/1.0, 11 for HTTP/1.1
};

enum class UpgradeAction {
  none,     // no offer, or one the proxy ignores (HTTP/1.0, no `Connection: upgrade`, only h2c)
  forward,  // `protocols` go upstream in Upgrade, with `Connection: upgrade`
  refuse,   // `refusal` is the answer; nothing is sent upstream
};

struct UpgradeDecision {
  UpgradeAction action = UpgradeAction::none;
  std::string protocols;  // forward: the offered protocols the route allows, as sent ("websocket")
  std::optional<Problem> refusal;
};

// `route`: the matched route's policy (its `upgrades`), null when none matched (kUnroutedUpgrades).
// `key_header_sent` and `handling` as route_request found them: a request the idempotency rules
// guard (a `key: required` route, or `optional` with its key sent or read from the body) is never
// upgraded: a tunnel cannot be fingerprinted, stored or replayed.
UpgradeDecision decide_upgrade(const UpgradeOffer& offer, const RoutePolicy* route, bool key_header_sent,
                               BodyHandling handling);

// Whether a 101's Upgrade (every line joined) names at least one protocol and only protocols
// among `offered` (what decide_upgrade forwarded), compared by name, case-insensitively.
bool switch_accepted(std::string_view offered, std::string_view answered);

// The name of an Upgrade list element ("websocket", "foo/2" -> "foo"), without surrounding OWS.
std::string_view upgrade_protocol_name(std::string_view element);

}  // namespace idem::core
