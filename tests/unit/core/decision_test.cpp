#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/decision.hpp"

namespace idem::core {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kFingerprint = "v1:aaaa";
constexpr std::string_view kOtherFingerprint = "v1:bbbb";
constexpr RecordState kAllStates[] = {RecordState::in_flight, RecordState::completed, RecordState::too_large,
                                      RecordState::unknown};

ClaimResult existing(RecordState state, std::string_view fingerprint = kFingerprint,
                     milliseconds lease_remaining = seconds(30)) {
  ClaimResult claim;
  claim.existing.fingerprint = std::string(fingerprint);
  claim.existing.state = state;
  claim.existing.lease_remaining = lease_remaining;
  return claim;
}

RoutePolicy policy_with(UnknownOutcome unknown_outcome) {
  RoutePolicy policy;
  policy.unknown_outcome = unknown_outcome;
  return policy;
}

TEST(Decide, ClaimedRequestExecutes) {
  ClaimResult claim;
  claim.claimed = true;
  const Decision decision = decide(claim, kFingerprint, RoutePolicy{});
  EXPECT_EQ(decision.action, Action::execute);
  EXPECT_EQ(decision.retry_after, seconds(0));
}

TEST(Decide, DifferentFingerprintIsMismatchInEveryState) {
  for (const RecordState state : kAllStates) {
    for (const UnknownOutcome unknown_outcome : {UnknownOutcome::lock, UnknownOutcome::retry}) {
      for (const milliseconds lease : {milliseconds(5000), milliseconds(0)}) {
        const Decision decision = decide(existing(state, kOtherFingerprint, lease), kFingerprint,
                                         policy_with(unknown_outcome));
        EXPECT_EQ(decision.action, Action::fingerprint_mismatch)
            << record_state_name(state) << " lease " << lease.count() << " ms";
      }
    }
  }
}

TEST(Decide, CompletedReplays) {
  EXPECT_EQ(decide(existing(RecordState::completed), kFingerprint, RoutePolicy{}).action, Action::replay);
}

TEST(Decide, TooLargeIsNeverReplayedNorReExecuted) {
  EXPECT_EQ(decide(existing(RecordState::too_large), kFingerprint, RoutePolicy{}).action,
            Action::too_large_to_replay);
}

TEST(Decide, UnknownOutcomeStaysUnknownUnderEveryPolicy) {
  for (const UnknownOutcome unknown_outcome : {UnknownOutcome::lock, UnknownOutcome::retry}) {
    EXPECT_EQ(decide(existing(RecordState::unknown), kFingerprint, policy_with(unknown_outcome)).action,
              Action::outcome_unknown);
  }
}

TEST(Decide, InFlightRetryAfterRoundsTheLeaseUp) {
  struct Case {
    milliseconds lease_remaining;
    seconds retry_after;
  };
  for (const Case& c : {Case{milliseconds(1500), seconds(2)}, Case{milliseconds(200), seconds(1)},
                        Case{milliseconds(1), seconds(1)}, Case{milliseconds(1000), seconds(1)},
                        Case{milliseconds(1001), seconds(2)}, Case{milliseconds(60000), seconds(60)}}) {
    const Decision decision =
        decide(existing(RecordState::in_flight, kFingerprint, c.lease_remaining), kFingerprint, RoutePolicy{});
    EXPECT_EQ(decision.action, Action::in_flight) << c.lease_remaining.count() << " ms";
    EXPECT_EQ(decision.retry_after, c.retry_after) << c.lease_remaining.count() << " ms";
  }
}

TEST(Decide, InFlightOnAWaitingRouteWaitsWithTheSameRetryAfter) {
  RoutePolicy waiting;
  waiting.in_flight = InFlightPolicy::wait;
  const Decision running = decide(existing(RecordState::in_flight, kFingerprint, milliseconds(1500)), kFingerprint, waiting);
  EXPECT_EQ(running.action, Action::wait);
  EXPECT_EQ(running.retry_after, seconds(2));
  // A lapsed lease under retry is a prompt retry: a waiting duplicate polls, and takes it over.
  waiting.unknown_outcome = UnknownOutcome::retry;
  EXPECT_EQ(decide(existing(RecordState::in_flight, kFingerprint, milliseconds(0)), kFingerprint, waiting).action,
            Action::wait);
  // Under lock a lapsed lease is unknown: nothing to wait for.
  waiting.unknown_outcome = UnknownOutcome::lock;
  EXPECT_EQ(decide(existing(RecordState::in_flight, kFingerprint, milliseconds(0)), kFingerprint, waiting).action,
            Action::outcome_unknown);
  // Finished records and mismatches are answered at once, as on a rejecting route.
  EXPECT_EQ(decide(existing(RecordState::completed), kFingerprint, waiting).action, Action::replay);
  EXPECT_EQ(decide(existing(RecordState::in_flight), kOtherFingerprint, waiting).action, Action::fingerprint_mismatch);
}

TEST(Decide, ACachedRecordIsDecidedLikeTheSameRecordFromTheStore) {
  for (const RecordState state : kAllStates) {
    for (const std::string_view fingerprint : {kFingerprint, kOtherFingerprint}) {
      const ClaimResult claim = existing(state);
      EXPECT_EQ(decide(claim.existing, fingerprint, RoutePolicy{}).action, decide(claim, fingerprint, RoutePolicy{}).action)
          << record_state_name(state) << " " << fingerprint;
    }
  }
}

TEST(Decide, LapsedLeaseUnderLockIsOutcomeUnknown) {
  for (const milliseconds lease : {milliseconds(0), milliseconds(-1), milliseconds(-60000)}) {
    const Decision decision =
        decide(existing(RecordState::in_flight, kFingerprint, lease), kFingerprint, policy_with(UnknownOutcome::lock));
    EXPECT_EQ(decision.action, Action::outcome_unknown) << lease.count() << " ms";
  }
}

TEST(Decide, LapsedLeaseUnderRetryAsksForAPromptRetry) {
  for (const milliseconds lease : {milliseconds(0), milliseconds(-1), milliseconds(-60000)}) {
    const Decision decision = decide(existing(RecordState::in_flight, kFingerprint, lease), kFingerprint,
                                     policy_with(UnknownOutcome::retry));
    EXPECT_EQ(decision.action, Action::in_flight) << lease.count() << " ms";
    EXPECT_EQ(decision.retry_after, seconds(1)) << lease.count() << " ms";
  }
}

TEST(Decide, ActionNames) {
  EXPECT_EQ(action_name(Action::execute), "execute");
  EXPECT_EQ(action_name(Action::replay), "replay");
  EXPECT_EQ(action_name(Action::fingerprint_mismatch), "fingerprint_mismatch");
  EXPECT_EQ(action_name(Action::in_flight), "in_flight");
  EXPECT_EQ(action_name(Action::wait), "wait");
  EXPECT_EQ(action_name(Action::too_large_to_replay), "too_large_to_replay");
  EXPECT_EQ(action_name(Action::outcome_unknown), "outcome_unknown");
}

TEST(RecordStateName, Names) {
  EXPECT_EQ(record_state_name(RecordState::in_flight), "in_flight");
  EXPECT_EQ(record_state_name(RecordState::completed), "completed");
  EXPECT_EQ(record_state_name(RecordState::too_large), "too_large");
  EXPECT_EQ(record_state_name(RecordState::unknown), "unknown");
}

TEST(ClassifyResponse, DefaultReleaseStatusesRelease) {
  const RoutePolicy policy;
  for (const int status : {408, 425, 429, 503}) {
    EXPECT_EQ(classify_response(status, "", 10, policy), Outcome::release) << status;
  }
}

TEST(ClassifyResponse, OtherStatusesAreStored) {
  const RoutePolicy policy;
  for (const int status : {200, 201, 204, 301, 400, 404, 409, 422, 500, 502, 504}) {
    EXPECT_EQ(classify_response(status, "", 10, policy), Outcome::store) << status;
  }
}

TEST(ClassifyResponse, CustomReleaseList) {
  RoutePolicy policy;
  policy.release_statuses = {500, 502};
  EXPECT_EQ(classify_response(500, "", 0, policy), Outcome::release);
  EXPECT_EQ(classify_response(502, "", 0, policy), Outcome::release);
  EXPECT_EQ(classify_response(503, "", 0, policy), Outcome::store);
  EXPECT_EQ(classify_response(429, "", 0, policy), Outcome::store);

  policy.release_statuses.clear();
  EXPECT_EQ(classify_response(503, "", 0, policy), Outcome::store);
}

TEST(ClassifyResponse, TransientHeaderForcesRelease) {
  const RoutePolicy policy;
  for (const char* value : {"true", "TRUE", "True", "?1", " true\t"}) {
    EXPECT_EQ(classify_response(200, value, 10, policy), Outcome::release) << value;
    EXPECT_EQ(classify_response(500, value, 10, policy), Outcome::release) << value;
  }
}

TEST(ClassifyResponse, FinalHeaderForcesStore) {
  const RoutePolicy policy;
  for (const char* value : {"false", "FALSE", "?0", "\tfalse "}) {
    EXPECT_EQ(classify_response(503, value, 10, policy), Outcome::store) << value;
    EXPECT_EQ(classify_response(429, value, 10, policy), Outcome::store) << value;
  }
}

TEST(ClassifyResponse, UnrecognizedHeaderFallsBackToTheStatusRule) {
  const RoutePolicy policy;
  for (const char* value : {"", "yes", "1", "0", "?2", "true;x", "tru e"}) {
    EXPECT_EQ(classify_response(503, value, 10, policy), Outcome::release) << value;
    EXPECT_EQ(classify_response(200, value, 10, policy), Outcome::store) << value;
  }
}

TEST(ClassifyResponse, BodyOverTheLimitIsStoredAsTooLarge) {
  RoutePolicy policy;
  policy.max_stored_body = 100;
  EXPECT_EQ(classify_response(200, "", 100, policy), Outcome::store);
  EXPECT_EQ(classify_response(200, "", 101, policy), Outcome::store_too_large);
  EXPECT_EQ(classify_response(503, "false", 101, policy), Outcome::store_too_large);
  // A release never keeps anything, whatever the size.
  EXPECT_EQ(classify_response(503, "", 101, policy), Outcome::release);
  EXPECT_EQ(classify_response(200, "true", 101, policy), Outcome::release);
}

TEST(ClassifyResponse, OutcomeNames) {
  EXPECT_EQ(outcome_name(Outcome::store), "store");
  EXPECT_EQ(outcome_name(Outcome::store_too_large), "store_too_large");
  EXPECT_EQ(outcome_name(Outcome::release), "release");
}

}  // namespace
}  // namespace idem::core
