// The pending guard counts: a key stays held while any background write on it runs, however the
// writes on one key overlap and whichever of them ends first.
#include "http/pending_settlements.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <utility>

namespace {

using idem::http::PendingSettlements;

TEST(PendingSettlements, AKeyIsHeldWhileItsGuardLivesAndFreeAfterwards) {
  PendingSettlements pending;
  EXPECT_FALSE(pending.contains("orders/-", "k-1"));
  {
    const PendingSettlements::Guard held = pending.hold("orders/-", "k-1");
    EXPECT_TRUE(held.holds());
    EXPECT_TRUE(pending.contains("orders/-", "k-1"));
    EXPECT_FALSE(pending.contains("orders/-", "k-2"));
    EXPECT_FALSE(pending.contains("other/-", "k-1"));
  }
  EXPECT_FALSE(pending.contains("orders/-", "k-1"));
}

// A waiting duplicate's lost-poll release and the first request's pending completion: the release
// ends first, and the completion still holds the key.
TEST(PendingSettlements, TwoGuardsOnOneKeyTheFirstReleasedTheKeyIsStillHeld) {
  PendingSettlements pending;
  std::optional<PendingSettlements::Guard> completion = pending.hold("orders/-", "k-1");
  std::optional<PendingSettlements::Guard> release = pending.hold("orders/-", "k-1");
  release.reset();
  EXPECT_TRUE(pending.contains("orders/-", "k-1")) << "the release let go of the completion's guard";
  completion.reset();
  EXPECT_FALSE(pending.contains("orders/-", "k-1"));
}

TEST(PendingSettlements, TheOrderInWhichOverlappingGuardsEndDoesNotMatter) {
  PendingSettlements pending;
  std::optional<PendingSettlements::Guard> first = pending.hold("orders/-", "k-1");
  std::optional<PendingSettlements::Guard> second = pending.hold("orders/-", "k-1");
  std::optional<PendingSettlements::Guard> third = pending.hold("orders/-", "k-1");
  first.reset();
  third.reset();
  EXPECT_TRUE(pending.contains("orders/-", "k-1"));
  second.reset();
  EXPECT_FALSE(pending.contains("orders/-", "k-1"));
}

TEST(PendingSettlements, AMovedGuardHoldsOnceAndAnEmptyOneNothing) {
  PendingSettlements pending;
  PendingSettlements::Guard empty;
  EXPECT_FALSE(empty.holds());
  PendingSettlements::Guard held = pending.hold("orders/-", "k-1");
  PendingSettlements::Guard moved = std::move(held);
  EXPECT_FALSE(held.holds());  // NOLINT(bugprone-use-after-move): a moved-from guard is empty
  EXPECT_TRUE(moved.holds());
  held.reset();  // letting go of nothing leaves the key held by `moved`
  EXPECT_TRUE(pending.contains("orders/-", "k-1"));
  empty = std::move(moved);  // a guard moved into another takes its hold along
  EXPECT_TRUE(pending.contains("orders/-", "k-1"));
  empty.reset();
  EXPECT_FALSE(pending.contains("orders/-", "k-1"));
}

TEST(PendingSettlements, AGuardAssignedOverAnotherLetsGoOfTheOneItHeld) {
  PendingSettlements pending;
  PendingSettlements::Guard guard = pending.hold("orders/-", "k-1");
  guard = pending.hold("orders/-", "k-2");
  EXPECT_FALSE(pending.contains("orders/-", "k-1"));
  EXPECT_TRUE(pending.contains("orders/-", "k-2"));
}

}  // namespace
