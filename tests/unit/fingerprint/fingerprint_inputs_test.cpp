// fingerprint_inputs: what a cache entry keeps so that a byte-identical retry skips the
// fingerprint. Its one promise is the direction that keeps a different request from being
// replayed: requests whose fingerprints differ never have equal inputs.
#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fingerprint/fingerprint.hpp"

namespace idem::fingerprint {
namespace {

struct Variant {
  const char* what;
  RequestFacts facts;
  std::vector<std::string> ignore_json;
};

RequestFacts order_request() {
  RequestFacts facts;
  facts.method = "POST";
  facts.path = "/orders";
  facts.query = "dry_run=false";
  facts.headers = {{"X-Account", std::string("acct-1")}};
  facts.content_type = "application/json";
  facts.body = R"({"amount":100,"nonce":"n-1"})";
  return facts;
}

// One change to every input the fingerprint reads, and shifts of bytes across each boundary
// between two neighbouring inputs (the framing must tell those apart).
std::vector<Variant> variants() {
  std::vector<Variant> all;
  const auto add = [&all](const char* what, auto change) {
    Variant variant{what, order_request(), {}};
    change(variant);
    all.push_back(variant);
  };
  add("as sent", [](Variant&) {});
  add("method", [](Variant& v) { v.facts.method = "PUT"; });
  add("path", [](Variant& v) { v.facts.path = "/orders/1"; });
  add("query", [](Variant& v) { v.facts.query = "dry_run=true"; });
  add("no query", [](Variant& v) { v.facts.query = ""; });
  add("content type", [](Variant& v) { v.facts.content_type = "text/plain"; });
  add("body", [](Variant& v) { v.facts.body = R"({"amount":101,"nonce":"n-1"})"; });
  add("body spelled otherwise", [](Variant& v) { v.facts.body = R"({"nonce":"n-1", "amount":1e2})"; });
  add("header value", [](Variant& v) { v.facts.headers = {{"X-Account", std::string("acct-2")}}; });
  add("header empty", [](Variant& v) { v.facts.headers = {{"X-Account", std::string()}}; });
  add("header absent", [](Variant& v) { v.facts.headers = {{"X-Account", std::nullopt}}; });
  add("header renamed", [](Variant& v) { v.facts.headers = {{"X-Tenant", std::string("acct-1")}}; });
  add("no headers", [](Variant& v) { v.facts.headers.clear(); });
  add("two headers", [](Variant& v) { v.facts.headers.emplace_back("X-Tenant", std::nullopt); });
  add("ignore_json", [](Variant& v) { v.ignore_json = {"/nonce"}; });
  add("two pointers", [](Variant& v) { v.ignore_json = {"/nonce", "/amount"}; });
  add("method|path", [](Variant& v) {
    v.facts.method = "POST/";
    v.facts.path = "orders";
  });
  add("path|query", [](Variant& v) {
    v.facts.path = "/ordersdry_run=false";
    v.facts.query = "";
  });
  add("query|type", [](Variant& v) {
    v.facts.query = "dry_run=falseapplication/json";
    v.facts.content_type = "";
  });
  add("type|body", [](Variant& v) {
    v.facts.content_type = "application/json{";
    v.facts.body = R"("amount":100,"nonce":"n-1"})";
  });
  add("header name|value", [](Variant& v) { v.facts.headers = {{"X-Accountacct-1", std::string()}}; });
  add("present|absent", [](Variant& v) {
    v.facts.headers = {{"X-Account", std::string("acct-1")}, {"B", std::nullopt}};
  });
  add("value holds the next header", [](Variant& v) {
    v.facts.headers = {{"X-Account", std::string("acct-1\x01-B")}};
  });
  add("pointer split", [](Variant& v) { v.ignore_json = {"/nonce/amount"}; });
  return all;
}

TEST(FingerprintInputs, NoTwoDifferentRequestsOrRouteSettingsShareInputs) {
  const std::vector<Variant> all = variants();
  std::vector<std::string> inputs;
  for (const Variant& variant : all) {
    inputs.push_back(fingerprint_inputs(variant.facts, variant.ignore_json));
    ASSERT_FALSE(inputs.back().empty()) << variant.what;
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(fingerprint_inputs(all[i].facts, all[i].ignore_json), inputs[i]) << all[i].what;
    for (std::size_t j = i + 1; j < all.size(); ++j)
      EXPECT_NE(inputs[i], inputs[j]) << all[i].what << " vs " << all[j].what;
  }
}

// The comparison a retry makes against kept inputs, without building its own.
TEST(FingerprintInputs, AComparisonWithKeptInputsAgreesWithBuildingThem) {
  const std::vector<Variant> all = variants();
  for (const Variant& variant : all) {
    for (const Variant& other : all) {
      const std::string kept = fingerprint_inputs(other.facts, other.ignore_json);
      EXPECT_EQ(has_fingerprint_inputs(variant.facts, variant.ignore_json, kept),
                fingerprint_inputs(variant.facts, variant.ignore_json) == kept)
          << variant.what << " against " << other.what;
    }
  }
  const Variant& sent = all.front();
  const std::string kept = fingerprint_inputs(sent.facts, sent.ignore_json);
  EXPECT_TRUE(has_fingerprint_inputs(sent.facts, sent.ignore_json, kept));
  EXPECT_FALSE(has_fingerprint_inputs(sent.facts, sent.ignore_json, ""));
  EXPECT_FALSE(has_fingerprint_inputs(sent.facts, sent.ignore_json, kept.substr(0, kept.size() - 1)));
  EXPECT_FALSE(has_fingerprint_inputs(sent.facts, sent.ignore_json, kept + "x"));
}

// Why the inputs must hold everything: each of these requests has a fingerprint of its own.
TEST(FingerprintInputs, EqualInputsMeanEqualFingerprintsBecauseEveryFingerprintedFieldIsInThem) {
  const std::vector<Variant> all = variants();
  for (const Variant& variant : all) {
    for (const Variant& other : all) {
      if (request_fingerprint(variant.facts, variant.ignore_json) ==
          request_fingerprint(other.facts, other.ignore_json))
        continue;
      EXPECT_NE(fingerprint_inputs(variant.facts, variant.ignore_json),
                fingerprint_inputs(other.facts, other.ignore_json))
          << variant.what << " vs " << other.what;
    }
  }
}

TEST(FingerprintInputs, InputsBeyondTheLimitAreNotKept) {
  RequestFacts facts = order_request();
  const std::size_t overhead = fingerprint_inputs(facts, {}).size() - facts.body.size();
  std::string body(kRememberedInputsMax - overhead, 'x');
  facts.body = body;
  const std::string at_the_limit = fingerprint_inputs(facts, {});
  EXPECT_EQ(at_the_limit.size(), kRememberedInputsMax);
  EXPECT_TRUE(has_fingerprint_inputs(facts, {}, at_the_limit));
  body.push_back('x');
  facts.body = body;
  EXPECT_TRUE(fingerprint_inputs(facts, {}).empty());
  EXPECT_FALSE(has_fingerprint_inputs(facts, {}, at_the_limit + "x"));
}

}  // namespace
}  // namespace idem::fingerprint
