// Every upstream failure: what it says about the request (kind), and the client's answer.
#include "core/upstream_failure.hpp"

#include <gtest/gtest.h>

#include "core/problem.hpp"
#include "core/record.hpp"

namespace {
using namespace idem::core;
using namespace std::chrono_literals;

TEST(UpstreamFailureKind, EveryFailureSaysWhetherTheRequestCanHaveRun) {
  struct Case {
    UpstreamFailure failure;
    UpstreamFailureKind kind;
    int status;
    std::string_view type;
  };
  for (const Case& c : {Case{UpstreamFailure::connect_failed, UpstreamFailureKind::nothing_sent, 502, "upstream-unreachable"},
                        Case{UpstreamFailure::pool_exhausted, UpstreamFailureKind::nothing_sent, 503, "upstream-unreachable"},
                        Case{UpstreamFailure::tls_failed, UpstreamFailureKind::nothing_sent, 502, "upstream-tls-failed"},
                        Case{UpstreamFailure::timeout, UpstreamFailureKind::outcome_unknown, 504, "upstream-timeout"},
                        Case{UpstreamFailure::connection_lost, UpstreamFailureKind::outcome_unknown, 502, "upstream-bad-response"},
                        Case{UpstreamFailure::bad_response, UpstreamFailureKind::outcome_unknown, 502, "upstream-bad-response"},
                        Case{UpstreamFailure::switched_protocols, UpstreamFailureKind::outcome_unknown, 502, "upstream-bad-response"},
                        Case{UpstreamFailure::response_too_large, UpstreamFailureKind::response_too_large, 502, "upstream-bad-response"}}) {
    EXPECT_EQ(upstream_failure_kind(c.failure), c.kind) << upstream_failure_name(c.failure);
    const Problem problem = upstream_failure_problem(c.failure);
    EXPECT_EQ(problem.status, c.status) << upstream_failure_name(c.failure);
    EXPECT_EQ(problem_type(problem), "urn:idemproxy:problem:" + std::string(c.type)) << upstream_failure_name(c.failure);
  }
  // Only "every connection busy" asks the client to come back after a second.
  EXPECT_EQ(upstream_failure_problem(UpstreamFailure::pool_exhausted).retry_after, std::chrono::seconds(1));
  EXPECT_FALSE(upstream_failure_problem(UpstreamFailure::timeout).retry_after.has_value());
}

// A request on a reused keep-alive connection goes again on a fresh one only when the upstream
// cannot have acted on it: not one byte written, or (a safe method) not one byte of an answer.
TEST(MaySendAgain, OnlyARequestOfWhichNothingWentOutIsSentAgainUnlessItIsSafe) {
  constexpr std::size_t kRequest = 7 * 1024 * 1024;
  for (const bool safe : {false, true}) {
    EXPECT_TRUE(may_send_again({.connection_gone = true, .bytes_written = 0, .safe_method = safe}))
        << "closed while idle, found at the first write";
    EXPECT_FALSE(may_send_again({.connection_gone = false, .bytes_written = 0, .safe_method = safe}))
        << "a deadline or an error that is not the peer's close";
    EXPECT_FALSE(
        may_send_again({.connection_gone = true, .bytes_written = kRequest, .bytes_read = 12, .safe_method = safe}))
        << "part of an answer came";
  }
  // The head (or more) went out and the peer reset the connection while we wrote the body: an
  // upstream that answers without reading the body may have run it.
  EXPECT_FALSE(may_send_again({.connection_gone = true, .bytes_written = 312, .safe_method = false}));
  EXPECT_FALSE(may_send_again({.connection_gone = true, .bytes_written = 1, .safe_method = false}));
  // Written whole, no answer: the upstream may have read it and died; only a safe method goes again.
  EXPECT_FALSE(may_send_again({.connection_gone = true, .bytes_written = kRequest, .safe_method = false}));
  EXPECT_TRUE(may_send_again({.connection_gone = true, .bytes_written = kRequest, .safe_method = true}));
  EXPECT_TRUE(may_send_again({.connection_gone = true, .bytes_written = 312, .safe_method = true}));
}

TEST(ObservedState, AnInFlightRecordWhoseLeaseLapsedReadsAsUnknown) {
  EXPECT_FALSE(lease_lapsed(RecordState::in_flight, 1ms));
  EXPECT_TRUE(lease_lapsed(RecordState::in_flight, 0ms));
  EXPECT_TRUE(lease_lapsed(RecordState::in_flight, -5ms));
  EXPECT_EQ(observed_state(RecordState::in_flight, 1ms), RecordState::in_flight);
  EXPECT_EQ(observed_state(RecordState::in_flight, 0ms), RecordState::unknown);
  for (RecordState finished : {RecordState::completed, RecordState::too_large, RecordState::unknown}) {
    EXPECT_FALSE(lease_lapsed(finished, 0ms));
    EXPECT_EQ(observed_state(finished, -1ms), finished);
  }
}

}  // namespace
