// relay/settle_decision: what each delivery outcome does to its row, case by case. No I/O.
#include <gtest/gtest.h>

#include "relay/settle_decision.hpp"

namespace idem::relay {
namespace {

constexpr unsigned kMaxAttempts = 5;

void expect(const SettleDecision& got, Settlement settlement, SettleReason reason, int attempts) {
  EXPECT_EQ(got.settlement, settlement) << settle_reason_name(got.reason);
  EXPECT_EQ(got.reason, reason) << settle_reason_name(got.reason) << " instead of " << settle_reason_name(reason);
  EXPECT_EQ(got.attempts, attempts);
}

TEST(SettleDecision, ADeliveredRowIsPublishedAndKeepsItsAttempts) {
  expect(decide_settlement(DeliveryOutcome::delivered, 0, kMaxAttempts), Settlement::published, SettleReason::delivered,
         0);
  expect(decide_settlement(DeliveryOutcome::delivered, 3, kMaxAttempts), Settlement::published, SettleReason::delivered,
         3);
}

TEST(SettleDecision, ARowTheSinkAlreadyHadIsPublishedAsADuplicate) {
  expect(decide_settlement(DeliveryOutcome::duplicate, 0, kMaxAttempts), Settlement::published, SettleReason::duplicate,
         0);
  expect(decide_settlement(DeliveryOutcome::duplicate, 4, kMaxAttempts), Settlement::published, SettleReason::duplicate,
         4);
}

TEST(SettleDecision, AFailedRowIsChargedOneAttemptAndRetried) {
  expect(decide_settlement(DeliveryOutcome::retry, 0, kMaxAttempts), Settlement::retry, SettleReason::failed, 1);
  expect(decide_settlement(DeliveryOutcome::retry, 3, kMaxAttempts), Settlement::retry, SettleReason::failed, 4);
}

TEST(SettleDecision, TheFailureThatReachesMaxAttemptsParksTheRow) {
  expect(decide_settlement(DeliveryOutcome::retry, 4, kMaxAttempts), Settlement::parked, SettleReason::out_of_attempts,
         5);
  // A row redriven or configured down past the limit parks at its next failure, never retries on.
  expect(decide_settlement(DeliveryOutcome::retry, 9, kMaxAttempts), Settlement::parked, SettleReason::out_of_attempts,
         10);
  // max_attempts 1: the first failure parks.
  expect(decide_settlement(DeliveryOutcome::retry, 0, 1), Settlement::parked, SettleReason::out_of_attempts, 1);
}

TEST(SettleDecision, ARowTheSinkRefusesForGoodIsParkedAtOnce) {
  expect(decide_settlement(DeliveryOutcome::poison, 0, kMaxAttempts), Settlement::parked, SettleReason::refused, 1);
  expect(decide_settlement(DeliveryOutcome::poison, 2, kMaxAttempts), Settlement::parked, SettleReason::refused, 3);
}

TEST(SettleDecision, ARowNotAttemptedIsReleasedUncharged) {
  expect(decide_settlement(DeliveryOutcome::held, 0, kMaxAttempts), Settlement::released, SettleReason::held, 0);
  expect(decide_settlement(DeliveryOutcome::held, 4, kMaxAttempts), Settlement::released, SettleReason::held, 4);
}

TEST(SettleDecision, ASinkOutageIsNeverChargedToTheRow) {
  expect(decide_settlement(DeliveryOutcome::unavailable, 0, kMaxAttempts), Settlement::released,
         SettleReason::sink_unavailable, 0);
  // Even a row one failure from parking: an outage is not its failure.
  expect(decide_settlement(DeliveryOutcome::unavailable, 4, kMaxAttempts), Settlement::released,
         SettleReason::sink_unavailable, 4);
}

}  // namespace
}  // namespace idem::relay
