#include <gtest/gtest.h>

#include <string>

#include "core/stored_headers.hpp"

namespace idem::core {
namespace {

TEST(HopByHop, FixedSetIsCaseInsensitive) {
  for (const char* name :
       {"Connection", "keep-alive", "PROXY-CONNECTION", "te", "Trailer", "transfer-encoding", "Upgrade"}) {
    EXPECT_TRUE(is_hop_by_hop(name, "")) << name;
  }
  EXPECT_FALSE(is_hop_by_hop("Content-Type", ""));
  EXPECT_FALSE(is_hop_by_hop("Trailers", ""));
}

TEST(HopByHop, FieldsNamedInConnectionAreHopByHop) {
  EXPECT_TRUE(is_hop_by_hop("X-Internal", "close, x-internal"));
  EXPECT_TRUE(is_hop_by_hop("x-internal", "X-Internal"));
  EXPECT_TRUE(is_hop_by_hop("X-Other", " keep-alive ,\tX-Other\t"));
  EXPECT_FALSE(is_hop_by_hop("X-Internal", "close, X-Internal-2"));
  EXPECT_FALSE(is_hop_by_hop("X-Internal", "close"));
}

TEST(FilterForStorage, KeepsEndToEndFieldsInOrderAndCase) {
  const HeaderList headers = {{"Content-Type", "application/json"},
                              {"x-request-id", "r1"},
                              {"ETag", "\"v1\""},
                              {"Vary", "Accept"},
                              {"x-request-id", "r2"}};
  EXPECT_EQ(filter_for_storage(headers, RoutePolicy{}), headers);
}

TEST(FilterForStorage, DropsHopByHopCredentialsAndRecomputedFields) {
  const HeaderList headers = {
      {"Content-Type", "text/plain"},
      {"connection", "keep-alive, X-Hop"},
      {"Keep-Alive", "timeout=5"},
      {"Transfer-Encoding", "chunked"},
      {"x-hop", "1"},
      {"Content-Length", "12"},
      {"Idempotency-Transient", "false"},
      {"idempotent-replay", "true"},
      {"Authorization", "Bearer secret"},
      {"cookie", "a=b"},
      {"Proxy-Authorization", "Basic x"},
      {"Set-Cookie", "session=abc"},
      {"X-Kept", "yes"},
  };
  const HeaderList expected = {{"Content-Type", "text/plain"}, {"X-Kept", "yes"}};
  EXPECT_EQ(filter_for_storage(headers, RoutePolicy{}), expected);
}

// The route's replay headers and Idempotency-Key-Expires are the proxy's to say: an upstream's own
// are never stored (the proxy adds its own on replay, and its expiry after this filter).
TEST(FilterForStorage, DropsTheRoutesReplayHeadersAndAnUpstreamsKeyExpiry) {
  RoutePolicy policy;
  policy.replay_headers = {"Idempotent-Replay", "Idempotent-Replayed"};
  const HeaderList headers = {{"idempotent-replayed", "true"},
                              {"Idempotency-Replayed", "true"},  // not listed: the upstream's own header
                              {"idempotency-key-expires", "Thu, 01 Jan 1970 00:00:00 GMT"},
                              {"X-Kept", "yes"}};
  const HeaderList expected = {{"Idempotency-Replayed", "true"}, {"X-Kept", "yes"}};
  EXPECT_EQ(filter_for_storage(headers, policy), expected);
}

TEST(FilterForStorage, ConnectionSpreadOverSeveralLinesNamesEveryField) {
  const HeaderList headers = {{"X-A", "1"}, {"Connection", "X-A"}, {"X-B", "2"}, {"Connection", "x-b"}, {"X-C", "3"}};
  const HeaderList expected = {{"X-C", "3"}};
  EXPECT_EQ(filter_for_storage(headers, RoutePolicy{}), expected);
}

TEST(FilterForStorage, SetCookieIsKeptOnlyWhenThePolicyAllowsIt) {
  const HeaderList headers = {{"Set-Cookie", "a=1"}, {"set-cookie", "b=2"}};
  RoutePolicy policy;
  EXPECT_TRUE(filter_for_storage(headers, policy).empty());
  policy.store_set_cookie = true;
  EXPECT_EQ(filter_for_storage(headers, policy), headers);
}

TEST(FilterForStorage, CredentialsAreDroppedEvenWhenSetCookieIsAllowed) {
  RoutePolicy policy;
  policy.store_set_cookie = true;
  EXPECT_TRUE(
      filter_for_storage({{"Authorization", "x"}, {"Cookie", "y"}, {"Proxy-Authorization", "z"}}, policy).empty());
}

TEST(FilterForStorage, CredentialsAreDroppedWhateverTheirCase) {
  RoutePolicy policy;
  const HeaderList headers = {{"AUTHORIZATION", "Bearer a"},
                              {"authorization", "Bearer b"},
                              {"COOKIE", "c=1"},
                              {"Cookie", "c=2"},
                              {"proxy-authorization", "Basic p"},
                              {"PROXY-AUTHORIZATION", "Basic q"},
                              {"SET-COOKIE", "s=1"},
                              {"set-cookie", "s=2"},
                              {"X-Kept", "k"}};
  const HeaderList expected = {{"X-Kept", "k"}};
  EXPECT_EQ(filter_for_storage(headers, policy), expected);
}

TEST(FilterForStorage, DropsFieldsTheBlockCannotHold) {
  const HeaderList headers = {{"X-Bad", "a\r\nInjected: 1"}, {"", "no name"}, {"X:Colon", "v"}, {"X-Good", "v"}};
  const HeaderList expected = {{"X-Good", "v"}};
  EXPECT_EQ(filter_for_storage(headers, RoutePolicy{}), expected);
}

TEST(HeaderBlock, EncodesOneLinePerField) {
  EXPECT_EQ(encode_header_block({{"Content-Type", "text/plain"}, {"x-a", ""}, {"X-B", "k: v"}}),
            "Content-Type: text/plain\r\nx-a: \r\nX-B: k: v\r\n");
  EXPECT_EQ(encode_header_block({}), "");
}

TEST(HeaderBlock, RoundTripIsExact) {
  const HeaderList headers = {{"Content-Type", "application/json; charset=utf-8"},
                              {"x-lower", "v"},
                              {"X-Dup", "1"},
                              {"X-Dup", "2"},
                              {"X-Empty", ""},
                              {"X-Spaces", "  padded  "},
                              {"X-Colon", "a: b: c"},
                              {"X-Utf8", "caf\xc3\xa9"}};
  const auto decoded = decode_header_block(encode_header_block(headers));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, headers);
}

TEST(HeaderBlock, EmptyBlockIsAnEmptyList) {
  const auto decoded = decode_header_block("");
  ASSERT_TRUE(decoded.has_value());
  EXPECT_TRUE(decoded->empty());
}

TEST(HeaderBlock, MalformedBlocksAreRejected) {
  for (const char* block : {
           "Content-Type: text/plain",     // no CRLF at the end
           "Content-Type:text/plain\r\n",  // no ": "
           "Content-Type text/plain\r\n",  // no separator at all
           ": value\r\n",                  // empty name
           "A: 1\r\n\r\n",                 // empty line
           "A: 1\nB: 2\r\n",               // bare LF inside
           "A: 1\rB: 2\r\n",               // bare CR inside
           "A: 1\r\nB: 2",                 // last line unterminated
           "A: 1\r\n\n",                   // stray LF
       }) {
    EXPECT_FALSE(decode_header_block(block).has_value()) << testing::PrintToString(std::string(block));
  }
}

// Every Connection line counts (joined by the caller): `close` in any of them closes.
TEST(KeepsConnectionOpen, CloseAnywhereClosesAndHttp10NeedsKeepAlive) {
  EXPECT_TRUE(keeps_connection_open(11, ""));
  EXPECT_TRUE(keeps_connection_open(11, "X-One"));
  EXPECT_FALSE(keeps_connection_open(11, "X-One, close, X-Two"));
  EXPECT_FALSE(keeps_connection_open(11, "CLOSE"));
  EXPECT_FALSE(keeps_connection_open(10, ""));
  EXPECT_TRUE(keeps_connection_open(10, "Keep-Alive"));
  EXPECT_FALSE(keeps_connection_open(10, "keep-alive, close"));
  EXPECT_TRUE(keeps_connection_open(11, "closed"));  // a token, not a substring
}

}  // namespace
}  // namespace idem::core
