// The request validator, rule by rule (the e2e suite sends the same heads as raw bytes).
#include <gtest/gtest.h>

#include <string>

#include "core/request_framing.hpp"

namespace idem::core {
namespace {

RequestHead head(std::vector<std::pair<std::string_view, std::string_view>> fields, unsigned version = 11,
                 std::string_view method = "POST") {
  return RequestHead{.method = method, .version = version, .fields = std::move(fields)};
}

std::string refusal(const RequestHead& request) {
  const std::optional<Problem> problem = request_framing_problem(request);
  return problem ? std::to_string(problem->status) + " " + problem->detail : "accepted";
}

TEST(RequestFraming, ChunkedMustBeTheOnlyAndFinalCoding) {
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "chunked"}})), "accepted");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", " Chunked\t"}})), "accepted");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", ", chunked"}})), "accepted");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "chunked, identity"}})),
            "400 the request is invalid: Transfer-Encoding: chunked must be the final transfer coding");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}})),
            "400 the request is invalid: Transfer-Encoding lists chunked more than once");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "gzip, chunked"}})),
            "501 transfer coding \"gzip\" is not implemented (only chunked is)");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "xchunked"}})),
            "501 transfer coding \"xchunked\" is not implemented (only chunked is)");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", ""}})),
            "400 the request is invalid: Transfer-Encoding is empty");
  EXPECT_EQ(refusal(head({{"Transfer-Encoding", "chunked"}}, 10)),
            "400 the request is invalid: Transfer-Encoding is not allowed in an HTTP/1.0 request");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "chunked"}, {"Content-Length", "3"}})),
            "400 the request is invalid: a request must not carry both Transfer-Encoding and Content-Length");
}

TEST(RequestFraming, ContentLengthIsOneRunOfDigits) {
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Content-Length", "03"}})), "accepted");
  for (const std::string_view bad : {"+3", "3, 3", "-1", "3 3", "0x3", "3.0"}) {
    EXPECT_EQ(refusal(head({{"Host", "a"}, {"Content-Length", bad}})),
              "400 the request is invalid: Content-Length must be a decimal number (digits only, one value)")
        << bad;
  }
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Content-Length", ""}})),
            "400 the request is invalid: Content-Length is empty");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Content-Length", "3"}, {"Content-Length", "3"}})),
            "400 the request is invalid: more than one Content-Length field");
}

TEST(RequestFraming, Http11HasExactlyOneWellFormedHost) {
  EXPECT_EQ(refusal(head({})), "400 the request is invalid: an HTTP/1.1 request must carry a Host field");
  EXPECT_EQ(refusal(head({}, 10)), "accepted");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Host", "a"}})), "400 the request is invalid: more than one Host field");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Host", "b"}}, 10)), "400 the request is invalid: more than one Host field")
      << "found by fuzz_request_head: HTTP/1.0 with two Host lines";
  for (const std::string_view good :
       {"api.example.com", "api:8080", "10.0.0.1:443", "[::1]", "[2001:db8::1]:8443", ""}) {
    EXPECT_EQ(refusal(head({{"Host", good}})), "accepted") << good;
  }
  for (const std::string_view bad : {"a/b", "u@a", "a:", "a:8x", "a, b", "[::1", "[]", "a:123456", ":80"}) {
    EXPECT_EQ(refusal(head({{"Host", bad}})), "400 the request is invalid: Host is not a valid host[:port]") << bad;
  }
}

// The scan reads eight bytes at a time: every byte value, at every position of a value longer than
// two words, against the rule itself (control characters but HTAB refused, obs-text accepted).
TEST(RequestFraming, EveryByteValueAtEveryPositionOfALongValueIsJudgedByTheRule) {
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    if (c == '\r' || c == '\n') continue;  // the parser ends the value there
    const bool control = (byte < 0x20 && c != '\t') || byte == 0x7f;
    for (std::size_t position = 0; position < 21; ++position) {
      std::string value(21, 'v');
      value[position] = c;
      EXPECT_EQ(refusal(head({{"Host", "a"}, {"X-Note", value}})),
                control ? "400 the request is invalid: the value of X-Note holds a control character" : "accepted")
          << "byte " << byte << " at " << position;
    }
  }
}

TEST(RequestFraming, ControlCharactersInValuesAndTraceContentAreRefused) {
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"X-Note", "tab\tis fine"}})), "accepted");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "\vchunked"}})),
            "400 the request is invalid: the value of Transfer-Encoding holds a control character");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"X-Note", "del\x7f"}})),
            "400 the request is invalid: the value of X-Note holds a control character");
  EXPECT_EQ(refusal(head({{"Host", "a"}}, 11, "TRACE")), "accepted");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Content-Length", "0"}}, 11, "TRACE")), "accepted");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Content-Length", "5"}}, 11, "TRACE")),
            "400 the request is invalid: a TRACE request carries no content");
  EXPECT_EQ(refusal(head({{"Host", "a"}, {"Transfer-Encoding", "chunked"}}, 11, "TRACE")),
            "400 the request is invalid: a TRACE request carries no content");
}

}  // namespace
}  // namespace idem::core
