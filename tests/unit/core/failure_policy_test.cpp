// The failure decisions, state by state: every store error on the claim, every upstream failure,
// every owner write's every answer.
#include <gtest/gtest.h>

#include "core/failure_policy.hpp"
#include "core/problem.hpp"

namespace idem::core {
namespace {

RoutePolicy with(StoreUnavailable store_unavailable, UnknownOutcome unknown_outcome = UnknownOutcome::lock) {
  RoutePolicy policy;
  policy.store_unavailable = store_unavailable;
  policy.unknown_outcome = unknown_outcome;
  return policy;
}

constexpr StoreUnavailable kBothModes[] = {StoreUnavailable::fail_closed, StoreUnavailable::fail_open};

TEST(AfterClaimFailure, AStoreThatWasNotReachedFollowsTheRoute) {
  const ClaimFailure closed = after_claim_failure(StoreError::unavailable, with(StoreUnavailable::fail_closed));
  EXPECT_EQ(closed.answer, ClaimFailureAnswer::unavailable);
  EXPECT_FALSE(closed.release_claim);
  const ClaimFailure open = after_claim_failure(StoreError::unavailable, with(StoreUnavailable::fail_open));
  EXPECT_EQ(open.answer, ClaimFailureAnswer::forward_unchecked);
  EXPECT_FALSE(open.release_claim);
}

TEST(AfterClaimFailure, ABusyStoreIsNeverForwardedUnprotectedAndHoldsNothing) {
  for (const StoreUnavailable mode : kBothModes) {
    const ClaimFailure failure = after_claim_failure(StoreError::busy, with(mode));
    EXPECT_EQ(failure.answer, ClaimFailureAnswer::unavailable) << static_cast<int>(mode);
    EXPECT_FALSE(failure.release_claim) << static_cast<int>(mode);
  }
}

TEST(AfterClaimFailure, ALostReplyIsNeverForwardedAndFreesTheKeyBehindIt) {
  for (const StoreUnavailable mode : kBothModes) {
    const ClaimFailure failure = after_claim_failure(StoreError::reply_lost, with(mode));
    EXPECT_EQ(failure.answer, ClaimFailureAnswer::unavailable) << static_cast<int>(mode);
    EXPECT_TRUE(failure.release_claim) << static_cast<int>(mode);
  }
}

TEST(AfterClaimFailure, AnAnswerWeCannotReadIsNeverForwardedAndFreesWhatWeMayOwn) {
  for (const StoreUnavailable mode : kBothModes) {
    const ClaimFailure failure = after_claim_failure(StoreError::internal, with(mode));
    EXPECT_EQ(failure.answer, ClaimFailureAnswer::unavailable);
    EXPECT_TRUE(failure.release_claim);
  }
}

TEST(AfterClaimFailure, ACorruptRecordIsNeitherReplayedNorRunNorReleased) {
  for (const StoreUnavailable mode : kBothModes) {
    const ClaimFailure failure = after_claim_failure(StoreError::corrupt, with(mode));
    EXPECT_EQ(failure.answer, ClaimFailureAnswer::corrupt);
    EXPECT_FALSE(failure.release_claim);
  }
}

TEST(AfterUpstreamFailure, EveryKindUnderEveryPolicy) {
  struct Case {
    UpstreamFailureKind kind;
    UnknownOutcome unknown_outcome;
    RecordFate fate;
  };
  for (const Case& c : {Case{UpstreamFailureKind::nothing_sent, UnknownOutcome::lock, RecordFate::release},
                        Case{UpstreamFailureKind::nothing_sent, UnknownOutcome::retry, RecordFate::release},
                        Case{UpstreamFailureKind::response_too_large, UnknownOutcome::lock, RecordFate::complete_too_large},
                        Case{UpstreamFailureKind::response_too_large, UnknownOutcome::retry, RecordFate::complete_too_large},
                        Case{UpstreamFailureKind::outcome_unknown, UnknownOutcome::lock, RecordFate::mark_unknown},
                        Case{UpstreamFailureKind::outcome_unknown, UnknownOutcome::retry, RecordFate::leave_in_flight}}) {
    EXPECT_EQ(after_upstream_failure(c.kind, with(StoreUnavailable::fail_closed, c.unknown_outcome)), c.fate)
        << static_cast<int>(c.kind) << "/" << static_cast<int>(c.unknown_outcome);
  }
}

TEST(AfterOwnerWrite, EveryAnswerToEveryWrite) {
  struct Case {
    OwnerWrite write;
    StoreError error;
    OwnerWriteNext next;
  };
  constexpr OwnerWrite kWrites[] = {OwnerWrite::complete, OwnerWrite::release, OwnerWrite::mark_unknown};
  for (const OwnerWrite write : kWrites) {
    EXPECT_EQ(after_owner_write(write, StoreError::ok), OwnerWriteNext::done);
    // Not known to have happened: run it again (each write is idempotent for its owner).
    EXPECT_EQ(after_owner_write(write, StoreError::unavailable), OwnerWriteNext::retry);
    EXPECT_EQ(after_owner_write(write, StoreError::busy), OwnerWriteNext::retry);
    EXPECT_EQ(after_owner_write(write, StoreError::reply_lost), OwnerWriteNext::retry);
    EXPECT_EQ(after_owner_write(write, StoreError::internal), OwnerWriteNext::give_up);
    EXPECT_EQ(after_owner_write(write, StoreError::not_found), OwnerWriteNext::give_up);
    EXPECT_EQ(after_owner_write(write, StoreError::corrupt), OwnerWriteNext::give_up);
  }
  // not_owner: a release has nothing left to free; a completion or a mark lost the key to someone.
  EXPECT_EQ(after_owner_write(OwnerWrite::release, StoreError::not_owner), OwnerWriteNext::done);
  EXPECT_EQ(after_owner_write(OwnerWrite::complete, StoreError::not_owner), OwnerWriteNext::give_up);
  EXPECT_EQ(after_owner_write(OwnerWrite::mark_unknown, StoreError::not_owner), OwnerWriteNext::give_up);
}

TEST(OwnerWriteHorizon, IsTheRecordsLife) {
  RoutePolicy policy;
  policy.ttl = std::chrono::hours(3);
  policy.lease = std::chrono::seconds(20);
  EXPECT_EQ(owner_write_horizon(policy), std::chrono::hours(3));
}

TEST(DecisionProblem, EveryRefusalHasItsStatus) {
  Record record;
  record.response.status = 201;
  const RoutePolicy policy;
  EXPECT_EQ(decision_problem({Action::fingerprint_mismatch}, record, policy).status, 422);
  EXPECT_EQ(decision_problem({Action::in_flight, std::chrono::seconds(3)}, record, policy).status, 409);
  EXPECT_EQ(decision_problem({Action::in_flight, std::chrono::seconds(3)}, record, policy).retry_after, std::chrono::seconds(3));
  EXPECT_EQ(decision_problem({Action::wait, std::chrono::seconds(2)}, record, policy).status, 409);
  EXPECT_EQ(decision_problem({Action::too_large_to_replay}, record, policy).status, 409);
  EXPECT_EQ(decision_problem({Action::outcome_unknown}, record, policy).status, 502);
}

TEST(DecisionProblem, BusyUpstreamConnectionsAreAPassing503WithRetryAfter) {
  const Problem busy = upstream_connections_busy_problem();
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(problem_type(busy), "urn:idemproxy:problem:upstream-unreachable");
  EXPECT_EQ(busy.retry_after, std::chrono::seconds(1));
  EXPECT_NE(busy.detail.find("every upstream connection of this proxy is busy"), std::string::npos) << busy.detail;
}

TEST(FailurePolicyNames, EveryValueHasItsOwnName) {
  EXPECT_EQ(claim_failure_answer_name(ClaimFailureAnswer::forward_unchecked), "forward_unchecked");
  EXPECT_EQ(claim_failure_answer_name(ClaimFailureAnswer::unavailable), "unavailable");
  EXPECT_EQ(claim_failure_answer_name(ClaimFailureAnswer::corrupt), "corrupt");
  EXPECT_EQ(record_fate_name(RecordFate::release), "release");
  EXPECT_EQ(record_fate_name(RecordFate::complete_too_large), "complete_too_large");
  EXPECT_EQ(record_fate_name(RecordFate::mark_unknown), "mark_unknown");
  EXPECT_EQ(record_fate_name(RecordFate::leave_in_flight), "leave_in_flight");
  EXPECT_EQ(owner_write_name(OwnerWrite::complete), "complete");
  EXPECT_EQ(owner_write_name(OwnerWrite::release), "release");
  EXPECT_EQ(owner_write_name(OwnerWrite::mark_unknown), "mark_unknown");
  EXPECT_EQ(store_error_name(StoreError::reply_lost), "reply_lost");
  EXPECT_EQ(store_error_name(StoreError::busy), "busy");
}

}  // namespace
}  // namespace idem::core
