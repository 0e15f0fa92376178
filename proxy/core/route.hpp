#pragma once
// A route: which requests it matches and the idempotency policy applied to them.
// Plain data filled by the config loader; no I/O.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/key_format.hpp"
#include "core/key_source.hpp"

namespace idem::core {

enum class KeyRequirement { off, optional, required };
enum class UnknownOutcome { lock, retry };               // what a lapsed in-flight lease means
enum class StoreUnavailable { fail_closed, fail_open };  // no store connection at claim time: 503 or unprotected
enum class InFlightPolicy { reject, wait };              // a duplicate of an in-flight request: 409 or hold it

struct RouteMatch {
  std::vector<std::string> methods;  // upper case; empty = any method
  std::string path;                  // "/orders", "/orders/{id}/refunds", "/api/*"
  // For upstreams whose router works that way (so a spelling it accepts cannot skip the route):
  bool case_insensitive = false;  // literal segments match in any ASCII case (/Orders is /orders)
  bool trailing_slash = false;    // one trailing '/' is ignored (/orders/ is /orders)
  // The request's host (Host without its port, lower case) must be this one; "*.example.com"
  // matches any name under example.com (not example.com itself). Empty: any host.
  std::string host;
};

struct RoutePolicy {
  std::string name;
  KeyRequirement key = KeyRequirement::required;
  std::string key_header = "Idempotency-Key";
  std::size_t max_key_length = 255;
  // Where the key is read (core/key_source.hpp); key_from_json is the JSON Pointer to a string in
  // the body that holds it, for the sources that read the body.
  KeySource key_source = KeySource::header;
  std::string key_from_json;
  std::vector<std::string> scope_headers;  // values hashed into the scope
  // The request's host (its Host without the port) is part of the scope: an upstream that serves
  // tenants by host name gets one key space per host. Off: every host shares one (the v1 scope).
  bool scope_host = true;
  std::vector<std::string> fingerprint_headers = {"Content-Type"};  // values hashed into the fingerprint
  std::vector<std::string> ignore_json;                             // JSON Pointers left out of the fingerprint
  std::vector<int> release_statuses = {408, 425, 429, 503};         // "not processed, try later"
  // Every header set to `true` on a replay (none on a first execution), and stripped from the
  // upstream's responses: only the proxy says what is a replay. More than one for clients that
  // parse another API's spelling (Stripe's Idempotent-Replayed).
  std::vector<std::string> replay_headers = {"Idempotent-Replay"};
  // Experimental: tell clients until when their key is remembered (Idempotency-Key-Expires, an
  // HTTP-date) on first executions and replays alike.
  bool key_expires_header = false;
  std::chrono::milliseconds ttl = std::chrono::hours(24);
  std::chrono::milliseconds lease = std::chrono::seconds(60);
  std::size_t max_stored_body = 1024 * 1024;
  bool store_set_cookie = false;  // replay Set-Cookie (off: never stored)
  UnknownOutcome unknown_outcome = UnknownOutcome::lock;
  StoreUnavailable store_unavailable = StoreUnavailable::fail_closed;
  InFlightPolicy in_flight = InFlightPolicy::reject;
  std::chrono::milliseconds wait_timeout = std::chrono::seconds(5);
  // How long past its ttl a record marked `unknown` is kept (and so keeps answering 502): webhook
  // senders retry for days, and an expired unknown record would let such a retry run again.
  std::chrono::milliseconds unknown_retention = std::chrono::hours(24 * 7);
  // The protocols a request may switch to through this route (`Upgrade`, RFC 9110 §7.8), by name,
  // e.g. "websocket": the connection becomes a byte tunnel once the upstream answers 101. Never
  // h2c; empty on a `key: required` route (the config loader sees to both).
  std::vector<std::string> upgrades = {"websocket"};
  // What the route's owner requires of a key beyond its syntax and max_key_length (a key that
  // breaks it gets 400 key-malformed naming the rule): a minimum length and a format.
  std::size_t min_key_length = 1;
  KeyFormat key_format;
};

// Where a route's requests go and what bounds their exchange: what a route leaves unset comes
// from its upstream (the timeouts) or from `limits` (the body), as nginx's location inherits.
struct RouteForwarding {
  std::string upstream;            // its name; empty: the first upstream declared
  std::size_t upstream_index = 0;  // into the configuration's upstreams, set by the loader
  // The answer's head, from the request's end (the upstream's `timeout` when unset).
  std::optional<std::chrono::milliseconds> timeout;
  // Each silence of a streamed answer's body (`timeout` when unset): a feed's longest quiet spell.
  std::optional<std::chrono::milliseconds> stream_idle_timeout;
  std::optional<std::size_t> max_request_body;  // 413 beyond (limits.max_request_body when unset)
};

struct Route {
  RouteMatch match;
  RoutePolicy policy;
  RouteForwarding forwarding;
};

// GET, HEAD and OPTIONS are safe methods: never subject to idempotency keys.
bool is_safe_method(std::string_view method);

}  // namespace idem::core
