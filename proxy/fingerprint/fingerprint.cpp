#include "fingerprint/fingerprint.hpp"

#include <array>
#include <charconv>
#include <optional>

#include "crypto/sha256.hpp"
#include "fingerprint/canonical_json.hpp"
#include "fingerprint/recent_digests.hpp"

// v1 pre-images (frame(x) = "<decimal byte length of x>:" x ","):
//   fingerprint: "idemproxy-fingerprint-v1" frame(method) frame(path) frame(query)
//                then per configured header: frame("h+") frame(lower-case name) frame(value)
//                                        or: frame("h-") frame(lower-case name)
//                then frame("json") frame(JCS canonical body) or frame("raw") frame(body bytes)
// v2 fingerprint: "idemproxy-fingerprint-v2" then the same frames, the canonical body's numbers in
//   their exact normal form (canonical_json.hpp, exact_number_form) instead of JCS doubles.
//   scope:       "idemproxy-scope-v1" then the header frames as above, in the route's order
// v2 scope (a route that scopes by host): "idemproxy-scope-v2" frame(host) then the header
//   frames as in v1. The host is passed already normalized (lower case, no port).
// tests/unit/fingerprint/fingerprint_test.cpp pins golden values of both.

namespace idem::fingerprint {
namespace {

// Domain separation: a fingerprint pre-image can never be mistaken for a scope pre-image, and a
// future v2 pre-image never equals a v1 one. Changing either string changes every stored value.
constexpr std::string_view kFingerprintDomainV1 = "idemproxy-fingerprint-v1";
constexpr std::string_view kFingerprintDomainV2 = "idemproxy-fingerprint-v2";
constexpr std::string_view kScopeDomain = "idemproxy-scope-v1";
constexpr std::string_view kHostScopeDomain = "idemproxy-scope-v2";

// Frame tags. A present header contributes its tag, name and value; an absent one only its tag
// and name, so "absent" differs from every value including the empty one.
constexpr std::string_view kHeaderPresent = "h+";
constexpr std::string_view kHeaderAbsent = "h-";
constexpr std::string_view kBodyJson = "json";
constexpr std::string_view kBodyRaw = "raw";

// SHA-256 over a sequence of netstring-like frames "<decimal length>:<bytes>,": the lengths make
// the encoding injective, so different field sequences never share a pre-image. The pre-image is
// gathered and hashed at once: one digest update per frame part cost more than the hashing.
class FramedDigest {
 public:
  // Fields up to this size are gathered into the pre-image; a larger one is hashed where it lies.
  static constexpr std::size_t kGatheredFieldMax = 4096;

  // `expected`: about how many bytes the frames will add, reserved at once (a pre-image grown by
  // appends was reallocated several times per request).
  explicit FramedDigest(std::string_view domain, std::size_t expected = 128) {
    preimage_.reserve(domain.size() + expected);
    preimage_.append(domain);
  }

  void frame(std::string_view field) {
    open_frame(field.size());
    if (field.size() > kGatheredFieldMax) {
      // A large body is hashed where it lies, not copied.
      if (!hasher_) hasher_.emplace();
      hasher_->update(preimage_);
      hasher_->update(field);
      preimage_.clear();
    } else {
      preimage_.append(field);
    }
    preimage_ += ',';
  }

  void header(std::string_view name, const std::optional<std::string>& value) {
    frame(value ? kHeaderPresent : kHeaderAbsent);
    // Header names are case-insensitive (RFC 9110 section 5.1): framed in lower case.
    open_frame(name.size());
    const std::size_t start = preimage_.size();
    preimage_.append(name);
    for (char* c = preimage_.data() + start; c != preimage_.data() + preimage_.size(); ++c) {
      if (*c >= 'A' && *c <= 'Z') *c = static_cast<char>(*c - 'A' + 'a');
    }
    preimage_ += ',';
    if (value) frame(*value);
  }

  std::string finish_hex() {
    if (!hasher_) return sha256_hex_remembered(preimage_);
    hasher_->update(preimage_);
    return crypto::to_hex(hasher_->finish());
  }

 private:
  // "<decimal length>:" of a frame about to be appended.
  void open_frame(std::size_t size) {
    std::array<char, 24> length{};
    const auto [end, error] = std::to_chars(length.data(), length.data() + length.size(), size);
    (void)error;  // 24 characters hold any size_t
    preimage_.append(length.data(), end);
    preimage_ += ':';
  }

  std::string preimage_;                  // not yet hashed
  std::optional<crypto::Sha256> hasher_;  // once a large field was hashed in place
};

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim_ows(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// The fingerprint, and what `key_pointer` addresses in the body from the same parse.
std::string fingerprint_and_key(const RequestFacts& facts, const std::vector<std::string>& ignore_json,
                                FingerprintScheme scheme, std::string_view key_pointer, core::BodyKeyLookup& key) {
  const bool v1 = scheme == FingerprintScheme::v1;
  key = {};
  std::optional<std::string> canonical;
  if (is_json_media_type(facts.content_type)) {
    canonical = canonicalize_json(facts.body, ignore_json, v1 ? JsonNumbers::ieee_double : JsonNumbers::exact_decimal,
                                  key_pointer, key);
  }
  const std::string_view body = canonical ? std::string_view(*canonical) : facts.body;

  // Each frame adds its length's digits, ':' and ','; a large body is hashed where it lies.
  constexpr std::size_t kFrameOverhead = 8;
  std::size_t expected = facts.method.size() + facts.path.size() + facts.query.size() + 5 * kFrameOverhead +
                         (body.size() > FramedDigest::kGatheredFieldMax ? 0 : body.size());
  for (const auto& [name, value] : facts.headers)
    expected += name.size() + (value ? value->size() : 0) + 3 * kFrameOverhead;
  FramedDigest digest(v1 ? kFingerprintDomainV1 : kFingerprintDomainV2, expected);
  digest.frame(facts.method);
  digest.frame(facts.path);
  digest.frame(facts.query);
  for (const auto& [name, value] : facts.headers) digest.header(name, value);
  digest.frame(canonical ? kBodyJson : kBodyRaw);
  digest.frame(body);
  return (v1 ? "v1:" : "v2:") + digest.finish_hex();
}

constexpr std::size_t kInputsLength = sizeof(std::size_t);

// The inputs' encoding (fingerprint_inputs): lengths and counts in the machine's own representation
// (the inputs never leave this process); each field is its length then its bytes, so no two
// sequences of fields share an encoding. Written by InputsWriter, or compared by InputsComparer
// with inputs kept earlier, without building them again.
template <class Sink>
void encode_inputs(const RequestFacts& facts, const std::vector<std::string>& ignore_json, Sink& sink) {
  const auto field = [&sink](std::string_view bytes) {
    sink.number(bytes.size());
    sink.bytes(bytes);
  };
  field(facts.method);
  field(facts.path);
  field(facts.query);
  field(facts.content_type);
  field(facts.body);
  sink.number(facts.headers.size());
  for (const auto& [name, value] : facts.headers) {
    field(name);
    sink.bytes(value ? "+" : "-");  // absent differs from every value, the empty one included
    if (value) field(*value);
  }
  sink.number(ignore_json.size());
  for (const std::string& pointer : ignore_json) field(pointer);
}

// An upper bound of the encoding's size (exact unless a header is absent).
std::size_t inputs_size(const RequestFacts& facts, const std::vector<std::string>& ignore_json) {
  std::size_t size = 7 * kInputsLength + facts.method.size() + facts.path.size() + facts.query.size() +
                     facts.content_type.size() + facts.body.size();
  for (const auto& [name, value] : facts.headers)
    size += 2 * kInputsLength + 1 + name.size() + (value ? value->size() : 0);
  for (const std::string& pointer : ignore_json) size += kInputsLength + pointer.size();
  return size;
}

struct InputsWriter {
  std::string& out;
  void number(std::size_t value) { out.append(reinterpret_cast<const char*>(&value), kInputsLength); }
  void bytes(std::string_view bytes) { out.append(bytes); }
};

struct InputsComparer {
  std::string_view rest;  // what the encoding has not reached yet
  bool equal = true;
  void number(std::size_t value) { bytes(std::string_view(reinterpret_cast<const char*>(&value), kInputsLength)); }
  void bytes(std::string_view bytes) {
    if (!equal) return;
    equal = rest.starts_with(bytes);
    if (equal) rest.remove_prefix(bytes.size());
  }
};

}  // namespace

std::string request_fingerprint(const RequestFacts& facts, const std::vector<std::string>& ignore_json,
                                FingerprintScheme scheme) {
  core::BodyKeyLookup unused;
  return fingerprint_and_key(facts, ignore_json, scheme, {}, unused);
}

std::string request_fingerprint(const RequestFacts& facts, const std::vector<std::string>& ignore_json,
                                std::string_view key_pointer, core::BodyKeyLookup& key) {
  return fingerprint_and_key(facts, ignore_json, kCurrentFingerprintScheme, key_pointer, key);
}

std::string fingerprint_inputs(const RequestFacts& facts, const std::vector<std::string>& ignore_json) {
  const std::size_t size = inputs_size(facts, ignore_json);
  if (size > kRememberedInputsMax) return {};
  std::string inputs;
  inputs.reserve(size);
  InputsWriter writer{inputs};
  encode_inputs(facts, ignore_json, writer);
  return inputs;
}

bool has_fingerprint_inputs(const RequestFacts& facts, const std::vector<std::string>& ignore_json,
                            std::string_view inputs) {
  if (inputs.empty()) return false;  // nothing was kept
  InputsComparer comparer{inputs};
  encode_inputs(facts, ignore_json, comparer);
  return comparer.equal && comparer.rest.empty();
}

std::optional<FingerprintScheme> fingerprint_scheme(std::string_view fingerprint) {
  if (fingerprint.starts_with("v1:")) return FingerprintScheme::v1;
  if (fingerprint.starts_with("v2:")) return FingerprintScheme::v2;
  return std::nullopt;
}

std::string record_scope(std::string_view route_name,
                         const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values) {
  std::string scope(route_name);
  if (scope_values.empty()) return scope + "/-";
  FramedDigest digest(kScopeDomain);
  for (const auto& [name, value] : scope_values) digest.header(name, value);
  return scope + "/v1:" + digest.finish_hex();
}

std::string host_scope(std::string_view route_name, std::string_view host,
                       const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values) {
  FramedDigest digest(kHostScopeDomain);
  digest.frame(host);
  for (const auto& [name, value] : scope_values) digest.header(name, value);
  return std::string(route_name) + "/v2:" + digest.finish_hex();
}

RequestScope request_scope(const core::RoutePolicy& policy, std::string_view host,
                           const std::vector<std::pair<std::string_view, std::optional<std::string>>>& scope_values) {
  std::string unscoped = record_scope(policy.name, scope_values);
  if (!policy.scope_host) return {std::move(unscoped), {}};
  return {host_scope(policy.name, host, scope_values), std::move(unscoped)};
}

bool is_json_media_type(std::string_view content_type) {
  const std::string_view media_type = trim_ows(content_type.substr(0, content_type.find(';')));
  const std::size_t slash = media_type.find('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  const std::string_view type = media_type.substr(0, slash);
  const std::string_view subtype = media_type.substr(slash + 1);
  if (iequals_ascii(type, "application") && iequals_ascii(subtype, "json")) return true;
  constexpr std::string_view kJsonSuffix = "+json";  // structured syntax suffix, RFC 6839
  return subtype.size() > kJsonSuffix.size() &&
         iequals_ascii(subtype.substr(subtype.size() - kJsonSuffix.size()), kJsonSuffix);
}

}  // namespace idem::fingerprint
