// core/upgrade_decision.hpp: which offers to switch protocols go upstream, which are ignored (the
// Upgrade field stripped as today) and which are refused before anything is sent; and whether an
// upstream's 101 switched to a protocol that was offered.
#include <gtest/gtest.h>

#include "core/upgrade_decision.hpp"

namespace idem::core {
namespace {

constexpr UpgradeOffer kWebSocket{.upgrade = "websocket", .connection = "Upgrade", .version = 11};

RoutePolicy route(KeyRequirement key, std::vector<std::string> upgrades = {"websocket"}) {
  RoutePolicy policy;
  policy.name = "feed";
  policy.key = key;
  policy.upgrades = std::move(upgrades);
  return policy;
}

UpgradeDecision decide(const UpgradeOffer& offer, const RoutePolicy* policy, bool key_sent = false,
                       BodyHandling handling = BodyHandling::streamed) {
  return decide_upgrade(offer, policy, key_sent, handling);
}

TEST(UpgradeDecision, AWebSocketOfferGoesUpstreamWithoutARouteAndOnKeylessRoutes) {
  const UpgradeDecision unrouted = decide(kWebSocket, nullptr);
  EXPECT_EQ(unrouted.action, UpgradeAction::forward);
  EXPECT_EQ(unrouted.protocols, "websocket");
  const RoutePolicy off = route(KeyRequirement::off);
  EXPECT_EQ(decide(kWebSocket, &off).action, UpgradeAction::forward);
  const RoutePolicy optional = route(KeyRequirement::optional);
  EXPECT_EQ(decide(kWebSocket, &optional).action, UpgradeAction::forward) << "optional, no key sent";
  // Names are case-insensitive, the Connection option too, among other options and lines.
  const UpgradeDecision spelled = decide({.upgrade = "WebSocket", .connection = "keep-alive, UPGRADE"}, &off);
  EXPECT_EQ(spelled.action, UpgradeAction::forward);
  EXPECT_EQ(spelled.protocols, "WebSocket") << "forwarded as offered";
}

TEST(UpgradeDecision, NoOfferOrOneTheProxyMustIgnoreLeavesAPlainRequest) {
  EXPECT_EQ(decide({.upgrade = "", .connection = "upgrade"}, nullptr).action, UpgradeAction::none);
  EXPECT_EQ(decide({.upgrade = "websocket", .connection = "keep-alive"}, nullptr).action, UpgradeAction::none)
      << "Upgrade without the Connection option";
  EXPECT_EQ(decide({.upgrade = "websocket", .connection = "upgrade", .version = 10}, nullptr).action,
            UpgradeAction::none)
      << "HTTP/1.0 (RFC 9110 §7.8)";
}

TEST(UpgradeDecision, H2cIsNeverForwardedButStrippedAsToday) {
  const UpgradeOffer h2c{.upgrade = "h2c", .connection = "Upgrade, HTTP2-Settings"};
  EXPECT_EQ(decide(h2c, nullptr).action, UpgradeAction::none);
  const RoutePolicy off = route(KeyRequirement::off, {"websocket", "h2c"});  // the loader refuses this list
  EXPECT_EQ(decide(h2c, &off).action, UpgradeAction::none);
  const RoutePolicy required = route(KeyRequirement::required, {});
  EXPECT_EQ(decide(h2c, &required).action, UpgradeAction::none) << "stripped, not refused, even on a guarded route";
  // Offered beside another protocol: only the other goes.
  const UpgradeDecision both = decide({.upgrade = "h2c, websocket", .connection = "upgrade"}, nullptr);
  EXPECT_EQ(both.action, UpgradeAction::forward);
  EXPECT_EQ(both.protocols, "websocket");
}

TEST(UpgradeDecision, AnUpgradeOnAGuardedRequestIsRefused403) {
  const RoutePolicy required = route(KeyRequirement::required, {});
  const UpgradeDecision refused = decide(kWebSocket, &required);
  ASSERT_EQ(refused.action, UpgradeAction::refuse);
  ASSERT_TRUE(refused.refusal);
  EXPECT_EQ(refused.refusal->status, 403);
  EXPECT_EQ(problem_type(*refused.refusal), "urn:idemproxy:problem:upgrade-refused");
  EXPECT_NE(refused.refusal->detail.find("\"feed\""), std::string::npos) << refused.refusal->detail;
  // Refused even if a (hand-built) policy listed the protocol.
  const RoutePolicy listed = route(KeyRequirement::required);
  EXPECT_EQ(decide(kWebSocket, &listed).action, UpgradeAction::refuse);
  const RoutePolicy optional = route(KeyRequirement::optional);
  EXPECT_EQ(decide(kWebSocket, &optional, true).action, UpgradeAction::refuse) << "optional with the key sent";
  EXPECT_EQ(decide(kWebSocket, &optional, false, BodyHandling::read_whole).action, UpgradeAction::refuse)
      << "optional, the key may be in the body";
}

TEST(UpgradeDecision, AProtocolTheRouteDoesNotListIsRefused403) {
  const RoutePolicy none = route(KeyRequirement::off, {});
  const UpgradeDecision refused = decide(kWebSocket, &none);
  ASSERT_EQ(refused.action, UpgradeAction::refuse);
  EXPECT_EQ(refused.refusal->status, 403);
  EXPECT_NE(refused.refusal->detail.find("upgrades: []"), std::string::npos) << refused.refusal->detail;
  EXPECT_EQ(decide({.upgrade = "foo/2", .connection = "upgrade"}, nullptr).action, UpgradeAction::refuse)
      << "no route: websocket only";
  const RoutePolicy custom = route(KeyRequirement::off, {"foo"});
  const UpgradeDecision versioned = decide({.upgrade = "websocket, foo/2", .connection = "upgrade"}, &custom);
  EXPECT_EQ(versioned.action, UpgradeAction::forward);
  EXPECT_EQ(versioned.protocols, "foo/2") << "the listed name, with its version, alone";
}

TEST(UpgradeDecision, A101MustSwitchToAnOfferedProtocol) {
  EXPECT_TRUE(switch_accepted("websocket", "websocket"));
  EXPECT_TRUE(switch_accepted("websocket", "WebSocket"));
  EXPECT_TRUE(switch_accepted("websocket, foo/2", "foo/2"));
  EXPECT_FALSE(switch_accepted("websocket", "")) << "a 101 must name its protocol";
  EXPECT_FALSE(switch_accepted("websocket", "h2c"));
  EXPECT_FALSE(switch_accepted("websocket", "websocket, h2c"));
  EXPECT_EQ(upgrade_protocol_name(" foo/2 "), "foo");
}

}  // namespace
}  // namespace idem::core
