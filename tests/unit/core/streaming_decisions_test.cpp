// core/body_handling.hpp and core/streamed_framing.hpp: which requests are streamed (decided from
// the head alone) and how a streamed answer is framed for the client.
#include <gtest/gtest.h>

#include "core/body_handling.hpp"
#include "core/streamed_framing.hpp"

namespace idem::core {
namespace {

RoutePolicy route(KeyRequirement key, KeySource source = KeySource::header) {
  RoutePolicy policy;
  policy.key = key;
  policy.key_source = source;
  if (source != KeySource::header) policy.key_from_json = "/id";
  return policy;
}

TEST(BodyHandling, EveryRequestNoIdempotencyRuleAppliesToIsStreamed) {
  EXPECT_EQ(body_handling(nullptr, "POST", false), BodyHandling::streamed) << "no route";
  const RoutePolicy required = route(KeyRequirement::required);
  for (const char* safe : {"GET", "HEAD", "OPTIONS"}) {
    EXPECT_EQ(body_handling(&required, safe, true), BodyHandling::streamed) << safe;
  }
  const RoutePolicy off = route(KeyRequirement::off);
  EXPECT_EQ(body_handling(&off, "POST", true), BodyHandling::streamed) << "key: off";
  const RoutePolicy optional = route(KeyRequirement::optional);
  EXPECT_EQ(body_handling(&optional, "PUT", false), BodyHandling::streamed) << "optional, no key sent";
}

TEST(BodyHandling, GuardedRequestsAndKeysThatMayBeInTheBodyAreReadWhole) {
  const RoutePolicy required = route(KeyRequirement::required);
  EXPECT_EQ(body_handling(&required, "POST", true), BodyHandling::read_whole);
  EXPECT_EQ(body_handling(&required, "POST", false), BodyHandling::read_whole) << "the 400 reads the body first";
  EXPECT_EQ(body_handling(&required, "get", false), BodyHandling::read_whole) << "method names are case-sensitive";
  const RoutePolicy optional = route(KeyRequirement::optional);
  EXPECT_EQ(body_handling(&optional, "POST", true), BodyHandling::read_whole) << "optional, key sent";
  const RoutePolicy body_key = route(KeyRequirement::optional, KeySource::header_then_json);
  EXPECT_EQ(body_handling(&body_key, "POST", false), BodyHandling::read_whole) << "the key may be in the JSON body";
  EXPECT_EQ(body_handling(&body_key, "POST", true), BodyHandling::read_whole);
  const RoutePolicy json_only = route(KeyRequirement::optional, KeySource::json);
  EXPECT_EQ(body_handling(&json_only, "POST", true), BodyHandling::read_whole) << "a key header is not read";
}

UpstreamFraming with_length() { return {true, false, ""}; }
UpstreamFraming chunked(std::string_view codings) { return {false, true, codings}; }
UpstreamFraming until_close(std::string_view codings = "") { return {false, false, codings}; }

StreamedFraming framing(unsigned status, UpstreamFraming upstream, unsigned client_version = 11,
                        bool head_request = false) {
  return streamed_framing(status, head_request, upstream, client_version);
}

TEST(StreamedFraming, ALengthStaysTheLengthAndChunkedStaysChunked) {
  const StreamedFraming length = framing(200, with_length());
  EXPECT_EQ(length.body, StreamedBody::length);
  EXPECT_FALSE(length.close_after);
  EXPECT_TRUE(length.transfer_encoding.empty());
  const StreamedFraming chunks = framing(200, chunked("chunked"));
  EXPECT_EQ(chunks.body, StreamedBody::chunked);
  EXPECT_EQ(chunks.transfer_encoding, "chunked");
  EXPECT_FALSE(chunks.close_after);
}

TEST(StreamedFraming, ABodyEndedByTheCloseEndsTheClientConnectionToo) {
  const StreamedFraming closed = framing(200, until_close());
  EXPECT_EQ(closed.body, StreamedBody::until_close);
  EXPECT_TRUE(closed.close_after);
  EXPECT_TRUE(closed.transfer_encoding.empty());
  EXPECT_FALSE(closed.refusal);
}

TEST(StreamedFraming, OtherCodingsAreNamedToAnHttp11ClientNeverStripped) {
  const StreamedFraming coded = framing(200, chunked("gzip, chunked"));
  EXPECT_EQ(coded.body, StreamedBody::chunked);
  EXPECT_EQ(coded.transfer_encoding, "gzip, chunked");
  const StreamedFraming coded_until_close = framing(200, until_close("gzip"));
  EXPECT_EQ(coded_until_close.body, StreamedBody::until_close);
  EXPECT_EQ(coded_until_close.transfer_encoding, "gzip");
  EXPECT_TRUE(coded_until_close.close_after);
}

TEST(StreamedFraming, AnHttp10ClientGetsChunkedBodiesEndedByTheCloseAndOtherCodingsRefused) {
  const StreamedFraming dechunked = framing(200, chunked(" Chunked "), 10);
  EXPECT_EQ(dechunked.body, StreamedBody::until_close);
  EXPECT_TRUE(dechunked.close_after);
  EXPECT_TRUE(dechunked.transfer_encoding.empty());
  for (const UpstreamFraming& coded : {chunked("gzip, chunked"), until_close("br")}) {
    const StreamedFraming refused = framing(200, coded, 10);
    ASSERT_TRUE(refused.refusal.has_value()) << coded.transfer_codings;
    EXPECT_EQ(refused.refusal->status, 502);
    EXPECT_NE(refused.refusal->detail.find(std::string(coded.transfer_codings)), std::string::npos);
  }
}

TEST(StreamedFraming, BodilessAnswersHaveNoBodyWhateverTheySay) {
  const StreamedFraming no_content = framing(204, with_length());
  EXPECT_EQ(no_content.body, StreamedBody::none);
  EXPECT_TRUE(no_content.drop_content_length);
  for (const StreamedFraming& kept : {framing(304, with_length()), framing(200, with_length(), 11, true),
                                      framing(200, chunked("chunked"), 11, true)}) {
    EXPECT_EQ(kept.body, StreamedBody::none);
    EXPECT_FALSE(kept.drop_content_length) << "a 304's or a HEAD answer's length describes the representation";
    EXPECT_TRUE(kept.transfer_encoding.empty());
    EXPECT_FALSE(kept.close_after);
  }
}

}  // namespace
}  // namespace idem::core
