#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/problem.hpp"

namespace idem::core {
namespace {

using std::chrono::seconds;
using namespace std::string_literals;

TEST(ProblemJson, ExactCompactOutput) {
  const Problem problem = in_flight_problem(seconds(3));
  EXPECT_EQ(problem_json(problem),
            R"({"type":"urn:idemproxy:problem:request-in-flight","title":"Request in progress","status":409,)"
            R"("detail":"a request with this idempotency key is still being processed; retry in 3 seconds"})");
}

TEST(ProblemJson, EscapesQuotesBackslashesAndControlCharacters) {
  Problem problem;
  problem.status = 400;
  problem.slug = "t";
  problem.title = "say \"hi\"";
  problem.detail = "a\\b\n\t\r\x01\x1f\0\x7f end"s;  // embedded NUL kept by the s suffix
  EXPECT_EQ(problem_json(problem), R"({"type":"urn:idemproxy:problem:t","title":"say \"hi\"","status":400,)"
                                   R"("detail":"a\\b\u000a\u0009\u000d\u0001\u001f\u0000)"
                                   "\x7f end\"}");
}

TEST(ProblemJson, Utf8PassesThrough) {
  Problem problem;
  problem.detail = "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80";
  EXPECT_NE(problem_json(problem).find("\"detail\":\"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80\""), std::string::npos);
}

struct ExpectedProblem {
  Problem problem;
  int status;
  std::string slug;
};

TEST(Problems, StatusAndTypeForEverySituation) {
  const std::vector<ExpectedProblem> cases = {
      {key_problem(KeyError::missing, "Idempotency-Key", 255), 400, "key-missing"},
      {key_problem(KeyError::empty, "Idempotency-Key", 255), 400, "key-empty"},
      {key_problem(KeyError::too_long, "Idempotency-Key", 255), 400, "key-too-long"},
      {key_problem(KeyError::malformed, "Idempotency-Key", 255), 400, "key-malformed"},
      {key_problem(KeyError::multiple, "Idempotency-Key", 255), 400, "key-multiple"},
      {fingerprint_mismatch_problem("Idempotency-Key"), 422, "fingerprint-mismatch"},
      {in_flight_problem(seconds(1)), 409, "request-in-flight"},
      {too_large_to_replay_problem(201, 1024), 409, "response-too-large-to-replay"},
      {outcome_unknown_problem(), 502, "outcome-unknown"},
      {store_unavailable_problem(seconds(2)), 503, "store-unavailable"},
      {upstream_unreachable_problem("connection refused"), 502, "upstream-unreachable"},
      {upstream_timeout_problem(), 504, "upstream-timeout"},
      {upstream_bad_response_problem("bad chunk size"), 502, "upstream-bad-response"},
      {request_too_large_problem(1024), 413, "request-too-large"},
      {request_line_too_long_problem(8192), 414, "uri-too-long"},
      {bad_request_problem("bad target"), 400, "bad-request"},
      {internal_problem("oops"), 500, "internal"},
      {record_corrupt_problem(), 500, "record-corrupt"},
  };
  for (const ExpectedProblem& c : cases) {
    EXPECT_EQ(c.problem.status, c.status) << c.slug;
    EXPECT_EQ(problem_type(c.problem), "urn:idemproxy:problem:" + c.slug);
    EXPECT_FALSE(c.problem.title.empty()) << c.slug;
    EXPECT_FALSE(c.problem.detail.empty()) << c.slug;
    const bool has_retry_after = c.slug == "request-in-flight" || c.slug == "store-unavailable";
    EXPECT_EQ(c.problem.retry_after.has_value(), has_retry_after) << c.slug;
  }
}

TEST(Problems, KeyProblemCarriesTheKeyErrorDetail) {
  const Problem problem = key_problem(KeyError::too_long, "webhook-id", 64);
  EXPECT_EQ(problem.detail, key_error_detail(KeyError::too_long, "webhook-id", 64));
  EXPECT_NE(problem.detail.find("64"), std::string::npos);
}

TEST(Problems, RetryAfterIsCarried) {
  EXPECT_EQ(in_flight_problem(seconds(7)).retry_after, seconds(7));
  EXPECT_EQ(store_unavailable_problem(seconds(4)).retry_after, seconds(4));
  EXPECT_NE(in_flight_problem(seconds(1)).detail.find("1 second"), std::string::npos);
  EXPECT_EQ(in_flight_problem(seconds(1)).detail.find("1 seconds"), std::string::npos);
}

TEST(Problems, TooLargeToReplaySaysStatusLimitAndNoReExecution) {
  EXPECT_EQ(too_large_to_replay_problem(201, 1048576).detail,
            "the original request completed with status 201 but its response exceeded the 1048576-byte limit "
            "and cannot be replayed; it will not be executed again");
}

TEST(Problems, OutcomeUnknownSaysNoReExecution) {
  const std::string detail = outcome_unknown_problem().detail;
  EXPECT_NE(detail.find("no response came back"), std::string::npos);
  EXPECT_NE(detail.find("operator"), std::string::npos);
  EXPECT_NE(detail.find("will not be executed again"), std::string::npos);
}

TEST(Problems, RecordCorruptSaysNeitherReplayNorReExecution) {
  const std::string detail = record_corrupt_problem().detail;
  EXPECT_NE(detail.find("integrity check"), std::string::npos);
  EXPECT_NE(detail.find("cannot be replayed"), std::string::npos);
  EXPECT_NE(detail.find("will not be executed again"), std::string::npos);
}

TEST(Problems, ReasonIsAppendedWhenGiven) {
  EXPECT_EQ(upstream_unreachable_problem("connection refused").detail,
            "the upstream service could not be reached: connection refused");
  EXPECT_EQ(upstream_unreachable_problem("").detail, "the upstream service could not be reached");
  EXPECT_NE(request_too_large_problem(5000).detail.find("5000-byte"), std::string::npos);
  EXPECT_NE(fingerprint_mismatch_problem("webhook-id").detail.find("webhook-id"), std::string::npos);
}

TEST(Problem, ConnectionLevelRefusalsHaveTheirOwnTypes) {
  const Problem headers = headers_too_large_problem("more than 100 header fields");
  EXPECT_EQ(headers.status, 431);
  EXPECT_EQ(problem_type(headers), "urn:idemproxy:problem:headers-too-large");
  EXPECT_EQ(headers.detail, "more than 100 header fields");
  EXPECT_FALSE(headers.retry_after);
  const Problem connections = too_many_connections_problem();
  EXPECT_EQ(connections.status, 503);
  EXPECT_EQ(problem_type(connections), "urn:idemproxy:problem:too-many-connections");
  ASSERT_TRUE(connections.retry_after);
  EXPECT_EQ(*connections.retry_after, seconds(1));
}

// problems.docs_url: each type is a link into the documentation, its anchor the slug.
TEST(ProblemDocs, UnsetTheTypeIsTheUrnAndThereIsNoLink) {
  const Problem malformed = key_problem(KeyError::malformed, "d");
  EXPECT_EQ(problem_type(malformed), "urn:idemproxy:problem:key-malformed");
  EXPECT_EQ(problem_type(malformed, ""), "urn:idemproxy:problem:key-malformed");
  EXPECT_EQ(problem_link(malformed, ""), std::nullopt);
  EXPECT_EQ(problem_json(malformed, ""), problem_json(malformed));
}

TEST(ProblemDocs, SetTheTypeIsTheDocsUrlWithTheSlugAsItsFragment) {
  constexpr std::string_view docs = "https://docs.example.com/api/errors";
  EXPECT_EQ(problem_type(key_problem(KeyError::malformed, "d"), docs),
            "https://docs.example.com/api/errors#key-malformed");
  EXPECT_EQ(problem_type(fingerprint_mismatch_problem("Idempotency-Key"), docs),
            "https://docs.example.com/api/errors#fingerprint-mismatch");
  EXPECT_EQ(problem_type(in_flight_problem(seconds(1)), docs), "https://docs.example.com/api/errors#request-in-flight");
  EXPECT_EQ(problem_json(upstream_timeout_problem(), docs),
            R"({"type":"https://docs.example.com/api/errors#upstream-timeout","title":"Upstream timeout",)"
            R"("status":504,"detail":"the upstream service did not answer in time"})");
  EXPECT_EQ(problem_type(bad_request_problem("x"), "https://docs.example.com/errors?v=2"),
            "https://docs.example.com/errors?v=2#bad-request")
      << "a query stays before the fragment";
}

TEST(ProblemDocs, OnlyA400OrA422LinksToItsDocumentation) {
  constexpr std::string_view docs = "https://docs.example.com/errors";
  EXPECT_EQ(problem_link(key_problem(KeyError::missing, "d"), docs),
            R"(<https://docs.example.com/errors#key-missing>; rel="describedby")");
  EXPECT_EQ(problem_link(bad_request_problem("x"), docs),
            R"(<https://docs.example.com/errors#bad-request>; rel="describedby")");
  EXPECT_EQ(problem_link(fingerprint_mismatch_problem("Idempotency-Key"), docs),
            R"(<https://docs.example.com/errors#fingerprint-mismatch>; rel="describedby")");
  EXPECT_EQ(problem_link(in_flight_problem(seconds(1)), docs), std::nullopt) << "409";
  EXPECT_EQ(problem_link(request_too_large_problem(10), docs), std::nullopt) << "413";
  EXPECT_EQ(problem_link(outcome_unknown_problem(), docs), std::nullopt) << "502";
  EXPECT_EQ(problem_link(store_unavailable_problem(seconds(1)), docs), std::nullopt) << "503";
}

}  // namespace
}  // namespace idem::core
