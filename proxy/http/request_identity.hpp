#pragma once
// Who a request is to the store: its idempotency key, the scope the key lives in and the
// fingerprint of what it asks, as its claim carries them (store::ClaimRequest), and the upgrade
// path for records made before the current scheme (a "v1:" fingerprint, a scope from before the
// authority joined it), which is matched against them during their ttl. Everything the exchange
// knows about the request's identity is here, so this file can be replaced as a whole (once no
// pre-upgrade record is alive, its upgrade path goes with it).
//
// One per exchange, on the worker's io thread. It views `request` (which must outlive it) and
// reads it until the claim decided; the upstream's request is written from it only after that.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/decision.hpp"
#include "core/key_source.hpp"
#include "core/route.hpp"
#include "fingerprint/fingerprint.hpp"
#include "http/request_parts.hpp"
#include "store/store.hpp"

namespace idem::http {

class RecordLookup;

class RequestIdentity {
 public:
  RequestIdentity(const core::RoutePolicy& policy, const RequestParts& request);

  // Fills claim() in: key, scope, fingerprint, ttl, lease and the route's take-over rule. `key` is
  // the key from its header, or std::nullopt when the route reads it from the JSON body: then the
  // reason the body holds no usable key is returned instead. A header-keyed request asks `lookup`
  // (before its find()) for the in-process cache's entry: a retry repeating its first request byte
  // for byte takes that entry's fingerprint instead of canonicalizing its body again.
  std::optional<core::KeyError> prepare_claim(std::optional<std::string> key, std::string_view path,
                                              std::string_view query, RecordLookup& lookup, bool cache_enabled);
  // For a request prepare_claim refused: what is wrong with the body's key (the 400's detail).
  std::string key_error_detail(core::KeyError error) const;

  store::ClaimRequest& claim() { return claim_; }
  const store::ClaimRequest& claim() const { return claim_; }

  // This request's fingerprint in the scheme of the record the claim found, for decide(): the
  // current one, unless the record was made before the current scheme (a "v1:" fingerprint).
  const std::string& fingerprint_for(const core::ClaimResult& found);

  // unknown_outcome: retry, and the claim found this request's v1 in-flight record with a lapsed
  // lease, which the store takes over only when the claim offers the v1 fingerprint too: when
  // true, claim() offers it from now on, and the caller claims again.
  bool takes_over_legacy_record(const core::ClaimResult& found);

  // What the in-process cache keeps with this request's completion, so its retry needs no
  // fingerprinting (empty when not kept). Taken once, by the record's completion.
  std::string take_fingerprint_inputs() { return std::move(fingerprint_inputs_); }

 private:
  std::string header_keyed_fingerprint(RecordLookup& lookup, bool cache_enabled);

  const core::RoutePolicy& policy_;
  const RequestParts& request_;
  fingerprint::RequestFacts facts_;                // views into request_
  core::BodyKeyLookup body_key_;                   // what key_from_json found, when the key is read from the body
  std::optional<std::string> broken_rule_;         // the route's key rule the body's key breaks (key_format.hpp)
  std::optional<std::string> legacy_fingerprint_;  // v1, computed when a v1 record is found
  std::string fingerprint_inputs_;                 // kept with this request's completion in the in-process cache
  store::ClaimRequest claim_;
};

}  // namespace idem::http
