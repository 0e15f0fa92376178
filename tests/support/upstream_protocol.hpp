#pragma once
// The request headers that steer idem-test-upstream and the shape of what it answers. Shared by
// the server and by the tests so both sides agree on names and on the generated body pattern.
#include <cstddef>
#include <string>
#include <string_view>

namespace idem::test::upstream {

// Respond with this status (200..599). Default 200.
inline constexpr std::string_view kStatusHeader = "X-Test-Status";
// Wait this many milliseconds (timer, not a sleep) before responding.
inline constexpr std::string_view kDelayHeader = "X-Test-Delay-Ms";
// "1": never respond; the connection stays open until the client closes it.
inline constexpr std::string_view kHangHeader = "X-Test-Hang";
// "1": close the socket right after reading the request, without a response.
inline constexpr std::string_view kResetHeader = "X-Test-Reset";
// "1": send the response with Transfer-Encoding: chunked, in several chunks.
inline constexpr std::string_view kChunkedHeader = "X-Test-Chunked";
// "Name: value" (may repeat): add that header to the response.
inline constexpr std::string_view kAddHeaderHeader = "X-Test-Header";
// N: respond with an N-byte pattern_body(N), Content-Type application/octet-stream.
inline constexpr std::string_view kBodySizeHeader = "X-Test-Body-Size";
// "1": respond with the request body and its Content-Type.
inline constexpr std::string_view kEchoHeader = "X-Test-Echo";
// "1": the JSON body also lists every received request header as "headers": [[name, value]...].
inline constexpr std::string_view kEchoHeadersHeader = "X-Test-Echo-Headers";

// "100,103" (1xx statuses, comma-separated): send these interim responses, in order, before the
// final one (a 103 carries a Link field, a 101 Upgrade and Connection: upgrade).
inline constexpr std::string_view kInterimHeader = "X-Test-Interim";

// "Name: value" (may repeat): with X-Test-Chunked, send this trailer field after the last chunk.
inline constexpr std::string_view kTrailerHeader = "X-Test-Trailer";

// Every executed (counted) request's response carries its global execution number here.
inline constexpr std::string_view kExecutionHeader = "X-Execution";

// Deterministic body for X-Test-Body-Size: bytes 0..250 repeating. The prime period keeps a copy
// shifted by a power-of-two buffer size from matching by accident.
inline std::string pattern_body(std::size_t size) {
  std::string body(size, '\0');
  for (std::size_t i = 0; i < size; ++i) body[i] = static_cast<char>(i % 251);
  return body;
}

}  // namespace idem::test::upstream
