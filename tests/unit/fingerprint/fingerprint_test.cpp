// Request fingerprint and record scope: golden values, sensitivity, isolation.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crypto/sha256.hpp"
#include "fingerprint/canonical_json.hpp"
#include "fingerprint/fingerprint.hpp"

namespace idem::fingerprint {
namespace {

using HeaderValues = std::vector<std::pair<std::string_view, std::optional<std::string>>>;

// Pinned outputs of the v1 and v2 pre-images (cross-checked once against an independent hashlib
// script building "idemproxy-fingerprint-v<n>" + "<len>:<bytes>," frames; v2's JSON body frame is
// {"amount":1e2,"currency":"EUR"}). If one of these fails, stored records would stop matching
// their retries after an upgrade: change a pre-image only together with a new version prefix. v1
// stays computable: records made before v2 are compared in v1 during their ttl.
constexpr const char* kGoldenJsonFingerprintV1 = "v1:b2a17f5348ace0cbbffa571e8210d277f661867fc370cb2a5f25bea8020617f8";
constexpr const char* kGoldenRawFingerprintV1 = "v1:5acf3e1d13fecbd247d305afbf1b1acb787897fcfee8150934f181affd70a336";
constexpr const char* kGoldenEmptyFingerprintV1 = "v1:a8a3035d97b30e958e18cb6276c4cbc1696b7cada3553520a46de24ca625a3f3";
constexpr const char* kGoldenJsonFingerprint = "v2:f0637161d913c6961437be62d7503db23b42fa2cc0171b0c5c4c1c1db71e2202";
constexpr const char* kGoldenRawFingerprint = "v2:47e336488c18b6168486b6ad38f489846c6fb674534907f521771f9eebcbcd21";
constexpr const char* kGoldenEmptyFingerprint = "v2:5a98a42e42f4aed3b961808720ee81d1631cac7a12b3a438233e7e3d50a6c3be";
constexpr const char* kGoldenScope = "create-order/v1:a4432e49486fc09cb23baf3ca91a83b8a75f072562774b710b96b6a812cfdd40";

RequestFacts order_request() {
  RequestFacts facts;
  facts.method = "POST";
  facts.path = "/orders";
  facts.query = "dry_run=false";
  facts.headers = {{"Content-Type", std::string("application/json")}};
  facts.content_type = "application/json";
  facts.body = R"({"amount":100,"currency":"EUR","client_timestamp":"2024-05-01T10:00:00Z"})";
  return facts;
}

std::string fingerprint(const RequestFacts& facts, const std::vector<std::string>& ignore = {}) {
  return request_fingerprint(facts, ignore);
}

std::string fingerprint_v1(const RequestFacts& facts, const std::vector<std::string>& ignore = {}) {
  return request_fingerprint(facts, ignore, FingerprintScheme::v1);
}

TEST(FingerprintGolden, JsonRequest) {
  EXPECT_EQ(fingerprint(order_request(), {"/client_timestamp"}), kGoldenJsonFingerprint);
  EXPECT_EQ(fingerprint_v1(order_request(), {"/client_timestamp"}), kGoldenJsonFingerprintV1);
}

TEST(FingerprintGolden, RawRequestWithAbsentHeader) {
  RequestFacts facts;
  facts.method = "PUT";
  facts.path = "/files/report.bin";
  facts.headers = {{"Content-Type", std::string("application/octet-stream")}, {"X-Tenant-Id", std::nullopt}};
  facts.content_type = "application/octet-stream";
  const std::string body("\x00\x01\xFFpayload", 10);
  facts.body = body;
  EXPECT_EQ(fingerprint(facts), kGoldenRawFingerprint);
  EXPECT_EQ(fingerprint_v1(facts), kGoldenRawFingerprintV1);
}

TEST(FingerprintGolden, EmptyRequest) {
  RequestFacts facts;
  facts.method = "DELETE";
  facts.path = "/";
  EXPECT_EQ(fingerprint(facts), kGoldenEmptyFingerprint);
  EXPECT_EQ(fingerprint_v1(facts), kGoldenEmptyFingerprintV1);
}

TEST(FingerprintScheme, NewFingerprintsAreV2AndTheStoredPrefixNamesTheScheme) {
  EXPECT_EQ(fingerprint_scheme(fingerprint(order_request())), FingerprintScheme::v2);
  EXPECT_EQ(fingerprint_scheme(fingerprint_v1(order_request())), FingerprintScheme::v1);
  EXPECT_EQ(fingerprint_scheme(kGoldenJsonFingerprintV1), FingerprintScheme::v1);
  // Domain separation: the two schemes never share a digest, even for a body without numbers.
  EXPECT_NE(fingerprint(order_request()).substr(3), fingerprint_v1(order_request()).substr(3));
  EXPECT_EQ(fingerprint_scheme("v3:00"), std::nullopt);
  EXPECT_EQ(fingerprint_scheme(""), std::nullopt);
  EXPECT_EQ(fingerprint_scheme("create-order/v1:ab"), std::nullopt);
}

// The issue's case: two account numbers beyond 2^64 that one double holds.
TEST(FingerprintNumbers, DistinctBigIntegersDiffer) {
  RequestFacts first = order_request();
  first.body = R"({"account":12345678901234567890})";
  RequestFacts second = order_request();
  second.body = R"({"account":12345678901234567891})";
  EXPECT_NE(fingerprint(first), fingerprint(second));
  EXPECT_EQ(fingerprint_v1(first), fingerprint_v1(second)) << "v1 is kept as it was: doubles";
}

TEST(FingerprintNumbers, DistinctDecimalsDiffer) {
  RequestFacts first = order_request();
  first.body = R"({"amount":0.30000000000000000001})";
  RequestFacts second = order_request();
  second.body = R"({"amount":0.3})";
  EXPECT_NE(fingerprint(first), fingerprint(second));
}

TEST(FingerprintNumbers, EqualValuesSpelledDifferentlyMatch) {
  RequestFacts base = order_request();
  base.body = R"({"amount":1,"fee":0,"rate":0.25})";
  for (const char* body :
       {R"({"amount":1.0,"fee":-0,"rate":0.250})", R"({"rate":25e-2,"fee":0.0,"amount":1e0})",
        R"({"amount":10e-1,"fee":0e10,"rate":2.5E-1})", R"({"amount":0.1e1,"fee":-0.0,"rate":0.025e1})"}) {
    RequestFacts spelled = order_request();
    spelled.body = body;
    EXPECT_EQ(fingerprint(spelled), fingerprint(base)) << body;
  }
}

// A number beyond exact_number_form's bounds: the body hashes as raw bytes (exact, not
// normalized), as v1 did for numbers beyond double range.
TEST(FingerprintNumbers, NumbersBeyondTheBoundsHashTheRawBody) {
  RequestFacts huge = order_request();
  huge.headers.clear();
  huge.body = R"({"n":1e1000000000})";
  RequestFacts raw = huge;
  raw.content_type = "application/octet-stream";
  EXPECT_EQ(fingerprint(huge), fingerprint(raw));
  RequestFacts other = huge;
  other.body = R"({"n":1e1000000001})";
  EXPECT_NE(fingerprint(huge), fingerprint(other));
}

TEST(ScopeGolden, TwoScopeHeaders) {
  EXPECT_EQ(
      record_scope("create-order", {{"Authorization", std::string("Bearer t0k3n")}, {"X-Tenant-Id", std::nullopt}}),
      kGoldenScope);
}

TEST(Fingerprint, HasVersionPrefixAndSixtyFourHexDigits) {
  const std::string value = fingerprint(order_request());
  ASSERT_EQ(value.size(), 3u + 64u);
  EXPECT_EQ(value.substr(0, 3), "v2:");
  EXPECT_EQ(value.find_first_not_of("0123456789abcdef", 3), std::string::npos) << value;
}

TEST(Fingerprint, IsDeterministic) { EXPECT_EQ(fingerprint(order_request()), fingerprint(order_request())); }

TEST(Fingerprint, EveryRequestFieldCounts) {
  const std::string base = fingerprint(order_request());

  RequestFacts method = order_request();
  method.method = "PUT";
  EXPECT_NE(fingerprint(method), base);

  RequestFacts path = order_request();
  path.path = "/orders/1";
  EXPECT_NE(fingerprint(path), base);

  RequestFacts query = order_request();
  query.query = "dry_run=true";
  EXPECT_NE(fingerprint(query), base);

  RequestFacts no_query = order_request();
  no_query.query = "";
  EXPECT_NE(fingerprint(no_query), base);

  RequestFacts body = order_request();
  body.body = R"({"amount":101,"currency":"EUR","client_timestamp":"2024-05-01T10:00:00Z"})";
  EXPECT_NE(fingerprint(body), base);
}

TEST(Fingerprint, HeaderValuePresenceAndNameCount) {
  RequestFacts present = order_request();
  present.headers = {{"X-Account", std::string("a")}};
  RequestFacts other_value = present;
  other_value.headers = {{"X-Account", std::string("b")}};
  RequestFacts empty_value = present;
  empty_value.headers = {{"X-Account", std::string()}};
  RequestFacts absent = present;
  absent.headers = {{"X-Account", std::nullopt}};
  RequestFacts other_name = present;
  other_name.headers = {{"X-Other", std::string("a")}};
  RequestFacts not_configured = present;
  not_configured.headers.clear();

  const std::vector<std::string> all = {fingerprint(present), fingerprint(other_value), fingerprint(empty_value),
                                        fingerprint(absent),  fingerprint(other_name),  fingerprint(not_configured)};
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = i + 1; j < all.size(); ++j) EXPECT_NE(all[i], all[j]) << i << " vs " << j;
  }
}

TEST(Fingerprint, HeaderNameCaseDoesNotCountButValueCaseDoes) {
  RequestFacts upper = order_request();
  upper.headers = {{"X-ACCOUNT", std::string("abc")}};
  RequestFacts lower = order_request();
  lower.headers = {{"x-account", std::string("abc")}};
  EXPECT_EQ(fingerprint(upper), fingerprint(lower));
  lower.headers = {{"x-account", std::string("ABC")}};
  EXPECT_NE(fingerprint(upper), fingerprint(lower));
}

TEST(Fingerprint, HeaderOrderCounts) {
  RequestFacts first = order_request();
  first.headers = {{"A", std::string("1")}, {"B", std::string("2")}};
  RequestFacts second = order_request();
  second.headers = {{"B", std::string("2")}, {"A", std::string("1")}};
  EXPECT_NE(fingerprint(first), fingerprint(second));
}

// Length framing: moving bytes from one field to its neighbour changes the fingerprint.
TEST(Fingerprint, FieldBoundariesCount) {
  RequestFacts a = order_request();
  a.path = "/orders";
  a.query = "x=1";
  RequestFacts b = order_request();
  b.path = "/orders?x=1";
  b.query = "";
  EXPECT_NE(fingerprint(a), fingerprint(b));

  RequestFacts c = order_request();
  c.method = "POST";
  c.path = "/x";
  RequestFacts d = order_request();
  d.method = "POST/";
  d.path = "x";
  EXPECT_NE(fingerprint(c), fingerprint(d));

  RequestFacts e = order_request();
  e.headers = {{"A", std::string("1")}, {"B", std::nullopt}};
  RequestFacts f = order_request();
  f.headers = {{"A", std::string("1h-1:b")}};
  EXPECT_NE(fingerprint(e), fingerprint(f));
}

TEST(Fingerprint, JsonKeyOrderAndWhitespaceDoNotCount) {
  RequestFacts reordered = order_request();
  reordered.body = "{ \"client_timestamp\" : \"2024-05-01T10:00:00Z\",\n  \"currency\": \"EUR\", \"amount\": 1.00e2 }";
  EXPECT_EQ(fingerprint(reordered), fingerprint(order_request()));
}

TEST(Fingerprint, IgnoredJsonPointersDoNotCount) {
  RequestFacts later = order_request();
  later.body = R"({"amount":100,"currency":"EUR","client_timestamp":"2024-05-01T10:00:07Z"})";
  EXPECT_NE(fingerprint(later), fingerprint(order_request()));
  EXPECT_EQ(fingerprint(later, {"/client_timestamp"}), fingerprint(order_request(), {"/client_timestamp"}));
}

TEST(Fingerprint, JsonSuffixMediaTypesAreCanonicalized) {
  RequestFacts a = order_request();
  a.content_type = "application/merge-patch+json; charset=utf-8";
  a.body = R"({"b":1,"a":2})";
  RequestFacts b = a;
  b.body = R"({ "a":2, "b":1 })";
  EXPECT_EQ(fingerprint(a), fingerprint(b));
}

TEST(Fingerprint, NonJsonBodiesHashAsBytes) {
  RequestFacts a = order_request();
  a.content_type = "text/plain";
  a.body = R"({"b":1,"a":2})";
  RequestFacts b = a;
  b.body = R"({"a":2,"b":1})";
  EXPECT_NE(fingerprint(a), fingerprint(b));
}

// The same bytes hashed as canonical JSON and as raw bytes never share a pre-image.
TEST(Fingerprint, JsonAndRawNeverCollide) {
  RequestFacts json = order_request();
  json.headers.clear();  // Content-Type not among the fingerprinted headers
  json.body = R"({"a":1})";
  RequestFacts raw = json;
  raw.content_type = "text/plain";
  ASSERT_EQ(canonicalize_json(json.body), std::string(json.body));
  EXPECT_NE(fingerprint(json), fingerprint(raw));
}

TEST(Fingerprint, JsonTypedBodyThatDoesNotParseHashesAsRaw) {
  RequestFacts broken = order_request();
  broken.headers.clear();
  broken.body = R"({"a":1,"a":2})";
  RequestFacts raw = broken;
  raw.content_type = "application/octet-stream";
  EXPECT_EQ(fingerprint(broken), fingerprint(raw));

  RequestFacts reordered = broken;
  reordered.body = R"({"a":2,"a":1})";
  EXPECT_NE(fingerprint(reordered), fingerprint(broken));
}

TEST(Fingerprint, BodyIgnoredEntirelyStillDiffersFromEmptyRawBody) {
  RequestFacts ignored_body = order_request();
  ignored_body.headers.clear();
  RequestFacts other_body = ignored_body;
  other_body.body = "[1,2,3]";
  EXPECT_EQ(fingerprint(ignored_body, {""}), fingerprint(other_body, {""}));
  RequestFacts empty_raw = ignored_body;
  empty_raw.content_type = "";
  empty_raw.body = "";
  EXPECT_NE(fingerprint(ignored_body, {""}), fingerprint(empty_raw));
}

TEST(Fingerprint, LargeBinaryBody) {
  std::string body(5 * 1024 * 1024, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 % 251);
  RequestFacts facts = order_request();
  facts.content_type = "application/octet-stream";
  facts.body = body;
  const std::string first = fingerprint(facts);
  body[body.size() / 2] ^= 1;
  EXPECT_NE(fingerprint(facts), first);
}

// A body too large to gather with the other frames is hashed where it lies: the digest is still
// that of the whole pre-image, frames before and after it included.
TEST(Fingerprint, LargeBodyHashesTheSamePreimage) {
  RequestFacts facts = order_request();
  facts.content_type = "application/octet-stream";
  const std::string body(10000, 'x');
  facts.body = body;
  const std::string preimage = "idemproxy-fingerprint-v2" + std::string("4:POST,7:/orders,13:dry_run=false,") +
                               "2:h+,12:content-type,16:application/json," + "3:raw,10000:" + body + ",";
  EXPECT_EQ(fingerprint(facts), "v2:" + crypto::to_hex(crypto::sha256(preimage)));
}

TEST(Scope, RouteWithoutScopeHeaders) { EXPECT_EQ(record_scope("webhooks", {}), "webhooks/-"); }

TEST(Scope, SameValuesSameScope) {
  const HeaderValues tenant_a = {{"X-Tenant-Id", std::string("a")}};
  EXPECT_EQ(record_scope("create-order", tenant_a), record_scope("create-order", tenant_a));
  EXPECT_EQ(record_scope("create-order", tenant_a), record_scope("create-order", {{"x-tenant-id", std::string("a")}}));
}

TEST(Scope, DifferentValuesIsolateTenants) {
  const std::string tenant_a = record_scope("create-order", {{"X-Tenant-Id", std::string("a")}});
  const std::string tenant_b = record_scope("create-order", {{"X-Tenant-Id", std::string("b")}});
  const std::string no_tenant = record_scope("create-order", {{"X-Tenant-Id", std::nullopt}});
  const std::string empty_tenant = record_scope("create-order", {{"X-Tenant-Id", std::string()}});
  EXPECT_NE(tenant_a, tenant_b);
  EXPECT_NE(tenant_a, no_tenant);
  EXPECT_NE(no_tenant, empty_tenant);
  EXPECT_NE(no_tenant, "create-order/-");
}

TEST(Scope, TheHostIsPartOfTheScopeUnlessTheRouteOptsOut) {
  core::RoutePolicy policy;
  policy.name = "create-order";
  const HeaderValues tenant = {{"X-Tenant-Id", std::string("a")}};
  const RequestScope at_a = request_scope(policy, "tenant-a.api.test", tenant);
  const RequestScope at_b = request_scope(policy, "tenant-b.api.test", tenant);
  EXPECT_NE(at_a.scope, at_b.scope);
  EXPECT_TRUE(at_a.scope.starts_with("create-order/v2:")) << at_a.scope;
  // The legacy scope is the one made before the host joined it: the same for every host.
  EXPECT_EQ(at_a.legacy_scope, record_scope("create-order", tenant));
  EXPECT_EQ(at_a.legacy_scope, at_b.legacy_scope);
  // The host and the header values are framed apart.
  EXPECT_NE(request_scope(policy, "a", {{"X-Tenant-Id", std::string("bc")}}).scope,
            request_scope(policy, "ab", {{"X-Tenant-Id", std::string("c")}}).scope);
  // A route without scope headers still gets one key space per host.
  core::RoutePolicy webhooks;
  webhooks.name = "webhooks";
  EXPECT_NE(request_scope(webhooks, "a", {}).scope, request_scope(webhooks, "b", {}).scope);
  EXPECT_EQ(request_scope(webhooks, "a", {}).legacy_scope, "webhooks/-");

  policy.scope_host = false;
  const RequestScope opted_out = request_scope(policy, "tenant-a.api.test", tenant);
  EXPECT_EQ(opted_out.scope, record_scope("create-order", tenant));
  EXPECT_EQ(opted_out.scope, request_scope(policy, "tenant-b.api.test", tenant).scope);
  EXPECT_TRUE(opted_out.legacy_scope.empty());
}

TEST(Scope, ValueBoundariesCount) {
  EXPECT_NE(record_scope("r", {{"A", std::string("x")}, {"B", std::string("y")}}),
            record_scope("r", {{"A", std::string("xy")}, {"B", std::string("")}}));
}

TEST(Scope, RouteNameCounts) {
  const HeaderValues tenant = {{"X-Tenant-Id", std::string("a")}};
  const std::string orders = record_scope("create-order", tenant);
  const std::string refunds = record_scope("create-refund", tenant);
  EXPECT_NE(orders, refunds);
  EXPECT_EQ(orders.substr(0, orders.find('/')), "create-order");
  EXPECT_EQ(refunds.substr(0, refunds.find('/')), "create-refund");
  EXPECT_EQ(orders.substr(orders.find('/')), refunds.substr(refunds.find('/')));
}

TEST(Scope, DiffersFromFingerprintOfSameValues) {
  RequestFacts facts;
  facts.headers = {{"X-Tenant-Id", std::string("a")}};
  const std::string scope = record_scope("r", facts.headers);
  EXPECT_NE(scope.substr(2), request_fingerprint(facts, {}));
}

TEST(JsonMediaType, RecognizesJsonAndJsonSuffix) {
  for (const char* type :
       {"application/json", "Application/JSON", "application/json; charset=utf-8", "  application/json ;charset=UTF-8",
        "application/problem+json", "application/vnd.api+json", "application/merge-patch+JSON", "text/x+json"}) {
    EXPECT_TRUE(is_json_media_type(type)) << type;
  }
}

TEST(JsonMediaType, RejectsEverythingElse) {
  for (const char* type : {"", "json", "text/plain", "application/jsonp", "application/json5", "text/json-seq",
                           "application/x-json-stream", "application/+json", "/json", "application/",
                           "multipart/form-data; boundary=json", "application/xml; x=+json"}) {
    EXPECT_FALSE(is_json_media_type(type)) << type;
  }
}

}  // namespace
}  // namespace idem::fingerprint

namespace idem::fingerprint {
namespace {

// key_from_json: one parse gives the fingerprint and the key, the fingerprint the same as without
// the lookup.
TEST(FingerprintBodyKey, TheSameParseReadsTheKeyAndTheFingerprintIsUnchanged) {
  RequestFacts facts;
  facts.method = "POST";
  facts.path = "/webhooks/stripe";
  facts.content_type = "application/json; charset=utf-8";
  facts.body = R"({"id":"evt_1","object":"event","data":{"object":{"id":"ch_1","amount":100}}})";
  core::BodyKeyLookup key;
  const std::string with_lookup = request_fingerprint(facts, {"/id"}, "/id", key);
  EXPECT_EQ(with_lookup, request_fingerprint(facts, {"/id"}));
  EXPECT_EQ(key.kind, core::JsonKind::string);  // an ignored member still addresses its value
  EXPECT_EQ(key.value, "evt_1");

  request_fingerprint(facts, {}, "/data/object/amount", key);
  EXPECT_EQ(key.kind, core::JsonKind::number);
  request_fingerprint(facts, {}, "/data/object", key);
  EXPECT_EQ(key.kind, core::JsonKind::object);
  request_fingerprint(facts, {}, "/missing", key);
  EXPECT_EQ(key.kind, core::JsonKind::absent);
  request_fingerprint(facts, {}, "/id/0", key);
  EXPECT_EQ(key.kind, core::JsonKind::absent);

  facts.body = R"({"id":"evt_\u00e9\"x\""})";
  request_fingerprint(facts, {}, "/id", key);
  EXPECT_EQ(key.value, "evt_\xc3\xa9\"x\"");  // escapes decoded
}

TEST(FingerprintBodyKey, ABodyThatIsNotJsonOrNotJsonTypedHasNoKey) {
  RequestFacts facts;
  facts.method = "POST";
  facts.path = "/events";
  facts.content_type = "application/json";
  facts.body = R"({"id":"evt_1",)";
  core::BodyKeyLookup key;
  request_fingerprint(facts, {}, "/id", key);
  EXPECT_EQ(key.kind, core::JsonKind::not_json);
  facts.body = R"({"id":"evt_1","id":"evt_2"})";  // duplicate member names are not I-JSON
  request_fingerprint(facts, {}, "/id", key);
  EXPECT_EQ(key.kind, core::JsonKind::not_json);
  facts.body = R"({"id":"evt_1"})";
  facts.content_type = "text/plain";
  request_fingerprint(facts, {}, "/id", key);
  EXPECT_EQ(key.kind, core::JsonKind::not_json);
}

}  // namespace
}  // namespace idem::fingerprint
