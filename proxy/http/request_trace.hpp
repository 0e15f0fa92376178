#pragma once
// What happened to one request, filled in along the way and turned into one access-log line and
// the request metrics in one place (client_connection.cpp).
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/body_abort.hpp"

namespace idem::metrics {
class Counter;
}

namespace idem::http {

// Decision labels (the `decision` label of idemproxy_requests_total and the access log).
namespace decision {
inline constexpr std::string_view passthrough = "passthrough";  // no route, safe method, key off/optional+absent
inline constexpr std::string_view executed = "new";             // executed upstream, response stored
inline constexpr std::string_view released = "released";        // executed (or not sent), key released
inline constexpr std::string_view replay = "replay";            // stored response replayed (store or in-process cache)
inline constexpr std::string_view replay_redis =
    "replay_redis";  // stored response replayed from the Redis replay cache
inline constexpr std::string_view mismatch = "mismatch_422";
inline constexpr std::string_view in_flight = "in_flight_409";
inline constexpr std::string_view too_large = "too_large_409";
inline constexpr std::string_view missing_key = "missing_key_400";
inline constexpr std::string_view invalid_key = "invalid_key_400";          // empty, too long, malformed, repeated
inline constexpr std::string_view unknown = "unknown";                      // outcome unknown (marked or answered)
inline constexpr std::string_view store_unavailable = "store_unavailable";  // fail_closed 503
inline constexpr std::string_view unchecked = "unchecked";                  // fail_open: forwarded unprotected
inline constexpr std::string_view corrupt = "corrupt_500";                  // stored record failed decryption
inline constexpr std::string_view refused = "refused";  // 400/413/431 before the request was read whole
}  // namespace decision

// The bodies one exchange moved, added to the route's byte counters once, at its end (not per
// write: the body pump counts per window).
struct BodyTally {
  std::uint64_t in = 0;   // request body bytes taken from the client
  std::uint64_t out = 0;  // answer body bytes the client's connection took
  BodyAbort aborted;      // a streamed body cut short, and by which side
};

struct RequestTrace {
  std::string route = "-";  // "-" when no route matched
  std::string_view decision = decision::passthrough;
  // The idempotency key, empty without one. Logged only as key_hash(key) (below), never as it is;
  // hashed only when a line is written.
  std::string key;
  bool cache_hit = false;
  std::chrono::microseconds upstream{0};  // time in the upstream exchange
  std::chrono::microseconds store{0};     // time in store operations
  std::chrono::microseconds handled{0};   // request read whole -> response ready to write
  BodyTally bodies;
  // The route's byte counters, found by ProxyMetrics::record with the rest of the route's series:
  // the exchange's end adds to them without a second lookup.
  metrics::Counter* request_body_bytes = nullptr;
  metrics::Counter* response_body_bytes = nullptr;
  // The request's W3C traceparent when well-formed (core/trace_context.hpp), else empty: it joins
  // this line to the upstream's spans and to the events the request wrote. The header itself is
  // forwarded to the upstream untouched either way.
  std::string traceparent;
};

// Logs never carry the raw key (it may be guessable or sensitive): the first 16 hex digits of its SHA-256.
std::string key_hash(std::string_view key);

}  // namespace idem::http
