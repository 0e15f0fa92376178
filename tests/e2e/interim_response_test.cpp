// Interim (1xx) upstream responses, RFC 9110 §15.2: never final, so never answered as the
// response, never stored or replayed, and never left on a pooled connection for the next request
// to read. 101 is refused: idemproxy never asks to switch protocols.
#include <gtest/gtest.h>

#include <string>

#include "e2e/e2e_support.hpp"
#include "support/upstream_protocol.hpp"

namespace idem::test::e2e {
namespace {

class InterimResponses : public ProxyTest {
 protected:
  // Requests on fresh keys, each answered with its own execution (the key the upstream saw is the
  // one sent): nothing of an earlier exchange was left on a pooled upstream connection.
  void expect_following_requests_get_their_own_answers(const std::string& label) {
    for (int i = 0; i < 6; ++i) {
      const std::string key = unique_key(label + "-next-" + std::to_string(i));
      const HttpResponse next = send(order(key));
      ASSERT_TRUE(next.ok()) << next.error;
      EXPECT_EQ(next.status, 200) << describe(next);
      EXPECT_EQ(string_member(upstream_json(next), "key"), key) << describe(next);
    }
  }
};

TEST_F(InterimResponses, EarlyHintsThenCreatedIsAnswered201StoredAndReplayed) {
  const std::string key = unique_key("early-hints");
  const auto request = order(key).with(std::string(upstream::kInterimHeader), "103").with(std::string(upstream::kStatusHeader), "201");
  const HttpResponse first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 201) << describe(first);
  EXPECT_EQ(string_member(upstream_json(first), "key"), key);
  EXPECT_FALSE(first.header("Link")) << "the 103's fields were merged into the final response";

  const HttpResponse replay = send(request);
  ASSERT_TRUE(replay.ok()) << replay.error;
  EXPECT_EQ(replay.status, 201) << describe(replay);
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);
  expect_following_requests_get_their_own_answers("early-hints");
}

TEST_F(InterimResponses, ContinueProcessingAndEarlyHintsBeforeTheFinalAreAllSkipped) {
  const std::string key = unique_key("several-interim");
  const auto request = order(key).with(std::string(upstream::kInterimHeader), "100, 102, 103, 103");
  const HttpResponse first = send(request);
  ASSERT_TRUE(first.ok()) << first.error;
  EXPECT_EQ(first.status, 200) << describe(first);
  EXPECT_EQ(string_member(upstream_json(first), "key"), key);
  const HttpResponse replay = send(request);
  EXPECT_TRUE(is_replay(replay)) << describe(replay);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(upstream_count(key), 1u);
  expect_following_requests_get_their_own_answers("several-interim");
}

// The upstream read the request, so its outcome is unknown: 502, and (unknown_outcome: lock) the
// retry gets 502 outcome-unknown without a second execution.
TEST_F(InterimResponses, SwitchingProtocolsIsRefused502AndTheKeyIsUnknown) {
  const std::string key = unique_key("switching");
  const auto request = order(key).with(std::string(upstream::kInterimHeader), "101");
  const auto problem = expect_problem(send(request), 502, "upstream-bad-response");
  EXPECT_NE(string_member(problem, "detail").value_or("").find("101"), std::string::npos);
  expect_problem(send(request), 502, "outcome-unknown");
  EXPECT_EQ(upstream_count(key), 1u);
  expect_following_requests_get_their_own_answers("switching");
}

}  // namespace
}  // namespace idem::test::e2e
