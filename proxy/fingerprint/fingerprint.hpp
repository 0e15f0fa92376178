#pragma once
// Request fingerprint and record scope. Both are versioned ("v1:") SHA-256 hex digests whose
// pre-image frames every field with its length, so they are stable across restarts, builds and
// machines, and no two different field sequences hash the same input.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/key_source.hpp"
#include "core/route.hpp"

namespace idem::fingerprint {

struct RequestFacts {
  std::string_view method;
  std::string_view path;   // concrete path, without the query
  std::string_view query;  // after '?', without it; empty when none
  // Values of the route's fingerprint_headers, in the route's order; a header sent several times
  // contributes its field values joined by ", "; an absent header contributes an "absent" marker.
  std::vector<std::pair<std::string_view, std::optional<std::string>>> headers;
  std::string_view content_type;  // decides whether the body is canonicalized as JSON
  std::string_view body;
};

// Fingerprint schemes. A record keeps the fingerprint it was claimed with, so a request is
// compared with a record in the record's scheme (fingerprint_scheme of the stored value).
enum class FingerprintScheme {
  v1,  // JSON numbers as IEEE doubles (RFC 8785): records made before v2; computed only to match them
  v2,  // JSON numbers by their exact decimal value: every new record
};
inline constexpr FingerprintScheme kCurrentFingerprintScheme = FingerprintScheme::v2;

// "v2:" (or "v1:") + 64 hex. JSON bodies (application/json or any +json media type) are
// canonicalized first, minus what the route's ignore_json pointers address: JCS (RFC 8785) with, in v2, each
// number in its exact normal form (exact_number_form) instead of a double. A JSON-typed body that
// does not canonicalize hashes as raw bytes (with a different tag, so raw and canonical never
// collide).
std::string request_fingerprint(const RequestFacts& facts, const std::vector<std::string>& ignore_json,
                                FingerprintScheme scheme = kCurrentFingerprintScheme);

// request_fingerprint in the current scheme that also reads `key_pointer` (a route's
// key_from_json) from a JSON body in the same parse: `key` is not_json when the body is not
// JSON-typed or does not canonicalize.
std::string request_fingerprint(const RequestFacts& facts, const std::vector<std::string>& ignore_json,
                                std::string_view key_pointer, core::BodyKeyLookup& key);

// Every input request_fingerprint(facts, ignore_json) reads, each field framed by its length: two
// requests with equal inputs have equal fingerprints (in the current scheme, in this build). An
// in-process cache entry keeps its first request's inputs, so a retry that repeats them byte for
// byte takes the entry's fingerprint instead of canonicalizing its body again; any other retry is
// fingerprinted. Empty (nothing to compare) when the inputs are longer than kRememberedInputsMax:
// keeping copies of large bodies would cost more memory than fingerprinting them costs time.
inline constexpr std::size_t kRememberedInputsMax = 4096;
std::string fingerprint_inputs(const RequestFacts& facts, const std::vector<std::string>& ignore_json);
// fingerprint_inputs(facts, ignore_json) == inputs, without building them; false for empty inputs.
bool has_fingerprint_inputs(const RequestFacts& facts, const std::vector<std::string>& ignore_json,
                            std::string_view inputs);

// The scheme a stored fingerprint was made with, from its prefix; std::nullopt for anything else.
std::optional<FingerprintScheme> fingerprint_scheme(std::string_view fingerprint);

// Scope of a record: route name + hash of the values of the route's scope headers, in order.
// Returned as "<route>/v1:<hex>"; a route without scope headers yields "<route>/-".
std::string record_scope(std::string_view route_name,
                         const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values);

// Scope of a record on a route that scopes by the request's host: "<route>/v2:<hex>" over the
// normalized host (core::scope_host) and the scope header values. The v1 form above
// stays the scope of routes that opt out, and the legacy scope a claim also probes (records made
// before the host joined the scope keep matching during their ttl).
std::string host_scope(std::string_view route_name, std::string_view host,
                       const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values);

// The scope a request's record is claimed under on a route, and the legacy scope the claim also
// probes (empty when the route's scope has one form only). `host` is the normalized one.
struct RequestScope {
  std::string scope;
  std::string legacy_scope;
};
RequestScope request_scope(const core::RoutePolicy& policy, std::string_view host,
                           const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values);

bool is_json_media_type(std::string_view content_type);

}  // namespace idem::fingerprint
