#include "http/request_identity.hpp"

#include <boost/beast/core/string.hpp>
#include <utility>
#include <variant>
#include <vector>

#include "cache/replay_cache.hpp"
#include "core/field_values.hpp"
#include "core/key_format.hpp"
#include "core/request_target.hpp"
#include "http/record_lookup.hpp"

namespace idem::http {

namespace {

using HeaderValues = std::vector<std::pair<std::string_view, std::optional<std::string>>>;

// Values of the named fields, in the given order.
HeaderValues collect_headers(const RequestParts& request, const std::vector<std::string>& names) {
  HeaderValues values;
  values.reserve(names.size());
  for (const auto& name : names) {
    std::optional<std::string> joined;
    for (const FieldView& field : request.fields) {
      if (boost::beast::iequals(field.name, name)) core::append_field_line(joined, field.value);
    }
    values.emplace_back(name, std::move(joined));
  }
  return values;
}

// The first line of a field, as Beast's operator[] reads it; empty when absent.
std::string_view first_value(const RequestParts& request, beast_http::field id) {
  for (const FieldView& field : request.fields) {
    if (field.id == id) return field.value;
  }
  return {};
}

}  // namespace

RequestIdentity::RequestIdentity(const core::RoutePolicy& policy, const RequestParts& request)
    : policy_(policy), request_(request) {}

std::optional<core::KeyError> RequestIdentity::prepare_claim(std::optional<std::string> key, std::string_view path,
                                                             std::string_view query, RecordLookup& lookup,
                                                             bool cache_enabled) {
  facts_.method = request_.method_string;
  facts_.path = path;
  facts_.query = query;
  facts_.headers = collect_headers(request_, policy_.fingerprint_headers);
  facts_.content_type = first_value(request_, beast_http::field::content_type);
  facts_.body = request_.body;
  const bool header_key = key.has_value();
  if (header_key) {
    claim_.key = std::move(*key);  // the fingerprint once the scope is known (header_keyed_fingerprint)
  } else {
    // One parse of the body: the fingerprint's canonicalization reads the key too.
    claim_.fingerprint =
        fingerprint::request_fingerprint(facts_, policy_.ignore_json, policy_.key_from_json, body_key_);
    auto from_body = core::body_key(body_key_, policy_.max_key_length);
    if (const auto* error = std::get_if<core::KeyError>(&from_body)) return *error;
    broken_rule_ = core::broken_key_rule(std::get<std::string>(from_body), policy_.min_key_length, policy_.key_format);
    if (broken_rule_) return core::KeyError::malformed;
    claim_.key = std::move(std::get<std::string>(from_body));
  }
  fingerprint::RequestScope scope =
      fingerprint::request_scope(policy_, core::scope_host(first_value(request_, beast_http::field::host)),
                                 collect_headers(request_, policy_.scope_headers));
  claim_.scope = std::move(scope.scope);
  claim_.legacy_scope = std::move(scope.legacy_scope);
  if (header_key) claim_.fingerprint = header_keyed_fingerprint(lookup, cache_enabled);
  claim_.ttl = policy_.ttl;
  claim_.lease = policy_.lease;
  claim_.take_over_lapsed_lease = policy_.unknown_outcome == core::UnknownOutcome::retry;
  // lock: a record nobody settles (we die mid-exchange) is an unknown outcome and lasts as long.
  if (!claim_.take_over_lapsed_lease) claim_.unsettled_retention = policy_.unknown_retention;
  return std::nullopt;
}

std::string RequestIdentity::key_error_detail(core::KeyError error) const {
  if (broken_rule_) return core::body_key_rule_detail(policy_.key_from_json, *broken_rule_);
  return core::body_key_error_detail(error, body_key_, policy_.key_from_json, policy_.max_key_length);
}

// A retry repeats its first request byte for byte: when the in-process cache holds this key's
// record with exactly this request's fingerprint inputs, the record's fingerprint is this
// request's too, and the body is not canonicalized again. Any other request is fingerprinted.
// (A key read from the body is only known after the body's parse: those are always fingerprinted.)
std::string RequestIdentity::header_keyed_fingerprint(RecordLookup& lookup, bool cache_enabled) {
  const cache::CachedRecord* cached = lookup.find_local();
  if (cached != nullptr) {
    if (fingerprint::has_fingerprint_inputs(facts_, policy_.ignore_json, cached->fingerprint_inputs))
      return cached->fingerprint;
  } else if (cache_enabled) {
    // Perhaps the first request: its inputs are kept with its completion (a copy: facts_ only views).
    fingerprint_inputs_ = fingerprint::fingerprint_inputs(facts_, policy_.ignore_json);
  }
  return fingerprint::request_fingerprint(facts_, policy_.ignore_json);
}

// The current fingerprint was computed up front; the v1 one is computed once, here, when a v1
// record is found (during its ttl after the upgrade).
const std::string& RequestIdentity::fingerprint_for(const core::ClaimResult& found) {
  if (found.claimed ||
      fingerprint::fingerprint_scheme(found.existing.fingerprint) != fingerprint::FingerprintScheme::v1)
    return claim_.fingerprint;
  if (!legacy_fingerprint_) {
    legacy_fingerprint_ =
        fingerprint::request_fingerprint(facts_, policy_.ignore_json, fingerprint::FingerprintScheme::v1);
  }
  return *legacy_fingerprint_;
}

bool RequestIdentity::takes_over_legacy_record(const core::ClaimResult& found) {
  const core::Record& existing = found.existing;
  const bool takes_over = !found.claimed && claim_.take_over_lapsed_lease && claim_.legacy_fingerprint.empty() &&
                          !found.existing_under_legacy_scope &&
                          core::lease_lapsed(existing.state, existing.lease_remaining) &&
                          existing.fingerprint == fingerprint_for(found) && existing.fingerprint != claim_.fingerprint;
  if (takes_over) claim_.legacy_fingerprint = *legacy_fingerprint_;
  return takes_over;
}

}  // namespace idem::http
