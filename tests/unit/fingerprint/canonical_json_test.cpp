// RFC 8785 canonicalization: strings, member order, structure, strictness, ignore pointers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fingerprint/canonical_json.hpp"

namespace idem::fingerprint {
namespace {

std::string canonical(std::string_view json, const std::vector<std::string>& ignore = {}) {
  return canonicalize_json(json, ignore).value_or("<nullopt>");
}

// RFC 8785 section 3.2.2 example: whitespace, number and string normalization together.
TEST(CanonicalJson, Rfc8785SerializationExample) {
  const std::string input = R"({
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  })";
  EXPECT_EQ(canonical(input),
            "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],"
            "\"string\":\"\xE2\x82\xAC$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
}

TEST(CanonicalJson, StringEscapesOnlyWhatJcsRequires) {
  EXPECT_EQ(canonical(R"(["\"", "\\", "\b", "\f", "\n", "\r", "\t"])"),
            R"(["\"","\\","\b","\f","\n","\r","\t"])");
  // Other control characters as \u00xx with lower-case hex; DEL and '/' stay literal.
  EXPECT_EQ(canonical(R"(["\u0000\u001F\u001b", "\u007f", "\/"])"), "[\"\\u0000\\u001f\\u001b\",\"\x7f\",\"/\"]");
}

TEST(CanonicalJson, NonAsciiIsLiteralUtf8) {
  EXPECT_EQ(canonical(R"("\u00e9\u20AC\ud83d\ude00")"), "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"");
  EXPECT_EQ(canonical("\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\""), "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"");
}

// RFC 8785 section 3.2.3: members sort by UTF-16 code units, so U+1F600 (D83D DE00) comes
// before U+FB33 although its UTF-8 bytes sort after.
TEST(CanonicalJson, MembersSortByUtf16CodeUnits) {
  const std::string input = R"({
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\ud83d\ude00": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis"
  })";
  EXPECT_EQ(canonical(input),
            "{\"\\r\":\"Carriage Return\","
            "\"1\":\"One\","
            "\"\xC2\x80\":\"Control\","
            "\"\xC3\xB6\":\"Latin Small Letter O With Diaeresis\","
            "\"\xE2\x82\xAC\":\"Euro Sign\","
            "\"\xF0\x9F\x98\x80\":\"Emoji: Grinning Face\","
            "\"\xEF\xAC\xB3\":\"Hebrew Letter Dalet With Dagesh\"}");
}

TEST(CanonicalJson, SortingIsByCodeUnitsNotByLengthOrCase) {
  EXPECT_EQ(canonical(R"({"b":1,"a":2,"aa":3,"B":4,"":5,"a\u0000":6})"),
            R"({"":5,"B":4,"a":2,"a\u0000":6,"aa":3,"b":1})");
  // Among supplementary characters and U+E000..U+FFFF: surrogate pairs first, then BMP.
  EXPECT_EQ(canonical(R"({"\uffff":1,"\ud800\udc00":2,"\ue000":3,"\udbff\udfff":4,"\ud7ff":5})"),
            "{\"\xED\x9F\xBF\":5,\"\xF0\x90\x80\x80\":2,\"\xF4\x8F\xBF\xBF\":4,"
            "\"\xEE\x80\x80\":3,\"\xEF\xBF\xBF\":1}");
}

TEST(CanonicalJson, NestedObjectsAndArraysAreCanonicalizedRecursively) {
  EXPECT_EQ(canonical(R"({"z":[{"y":1,"x":[3,{"b":null,"a":true}]},[]],"a":{}})"),
            R"({"a":{},"z":[{"x":[3,{"a":true,"b":null}],"y":1},[]]})");
}

TEST(CanonicalJson, ScalarsAtTopLevel) {
  EXPECT_EQ(canonical("true"), "true");
  EXPECT_EQ(canonical("false"), "false");
  EXPECT_EQ(canonical(" null "), "null");
  EXPECT_EQ(canonical("\"x\""), "\"x\"");
  EXPECT_EQ(canonical("  42\n"), "42");
}

TEST(CanonicalJson, WhitespaceAndMemberOrderDoNotMatter) {
  const std::string compact = R"({"amount":100,"currency":"EUR","items":[{"sku":"A1","qty":2}]})";
  const std::string spaced = "{\r\n\t\"items\" : [ { \"qty\" : 2 , \"sku\" : \"A1\" } ] ,\n"
                             "  \"currency\":\"EUR\",   \"amount\": 1e2 }\n";
  ASSERT_NE(canonicalize_json(compact), std::nullopt);
  EXPECT_EQ(canonicalize_json(compact), canonicalize_json(spaced));
  EXPECT_EQ(canonical(compact), R"({"amount":100,"currency":"EUR","items":[{"qty":2,"sku":"A1"}]})");
}

TEST(CanonicalJson, ArrayOrderMatters) { EXPECT_NE(canonical("[1,2]"), canonical("[2,1]")); }

TEST(CanonicalJson, DuplicateMemberNamesAreRejected) {
  EXPECT_EQ(canonicalize_json(R"({"a":1,"a":2})"), std::nullopt);
  EXPECT_EQ(canonicalize_json(R"({"a":1,"b":2,"a":1})"), std::nullopt);
  EXPECT_EQ(canonicalize_json(R"({"x":{"k":1,"k":1}})"), std::nullopt);
  EXPECT_EQ(canonicalize_json(R"([{"k":1},{"k":2,"k":3}])"), std::nullopt);
  // Spelled differently, equal after unescaping.
  EXPECT_EQ(canonicalize_json(R"({"a":1,"\u0061":2})"), std::nullopt);
  // The same name in sibling objects is not a duplicate.
  EXPECT_EQ(canonical(R"([{"k":1},{"k":2}])"), R"([{"k":1},{"k":2}])");
}

TEST(CanonicalJson, DuplicatesAreRejectedEvenWhenIgnored) {
  EXPECT_EQ(canonicalize_json(R"({"a":1,"a":2})", {"/a"}), std::nullopt);
}

TEST(CanonicalJson, InvalidUtf8IsRejected) {
  EXPECT_EQ(canonicalize_json("\"\xFF\""), std::nullopt);
  EXPECT_EQ(canonicalize_json("\"\xC3\""), std::nullopt);                  // truncated sequence
  EXPECT_EQ(canonicalize_json("\"\xC0\xAF\""), std::nullopt);              // overlong '/'
  EXPECT_EQ(canonicalize_json("\"\xED\xA0\x80\""), std::nullopt);          // encoded surrogate
  EXPECT_EQ(canonicalize_json("\"\xF4\x90\x80\x80\""), std::nullopt);      // beyond U+10FFFF
  EXPECT_EQ(canonicalize_json("{\"\xFE\":1}"), std::nullopt);              // in a member name
}

TEST(CanonicalJson, LoneSurrogateEscapesAreRejected) {
  EXPECT_EQ(canonicalize_json(R"("\ud800")"), std::nullopt);
  EXPECT_EQ(canonicalize_json(R"("\udc00")"), std::nullopt);
  EXPECT_EQ(canonicalize_json(R"("\ud800x")"), std::nullopt);
}

TEST(CanonicalJson, InvalidSyntaxIsRejected) {
  for (const char* bad : {"", " ", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "[1 2]", "01", "+1", ".5", "1.",
                          "NaN", "Infinity", "-Infinity", "[1] // comment", "/* c */ 1", "tru", "\"a\nb\"",
                          "{\"a\"}", "[\"unterminated]"}) {
    EXPECT_EQ(canonicalize_json(bad), std::nullopt) << "input: " << bad;
  }
}

TEST(CanonicalJson, TrailingDataIsRejected) {
  EXPECT_EQ(canonicalize_json("{} x"), std::nullopt);
  EXPECT_EQ(canonicalize_json("{}{}"), std::nullopt);
  EXPECT_EQ(canonicalize_json("1 2"), std::nullopt);
  EXPECT_EQ(canonicalize_json(std::string_view("{}\0", 3)), std::nullopt);
  EXPECT_EQ(canonical("{} \r\n\t"), "{}");
}

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(CanonicalJson, NestingUpToSixtyFourLevelsIsAccepted) {
  EXPECT_EQ(canonical(nested_arrays(64)), nested_arrays(64));
}

TEST(CanonicalJson, DeeperNestingIsNotJsonAndDoesNotCrash) {
  EXPECT_EQ(canonicalize_json(nested_arrays(65)), std::nullopt);
  EXPECT_EQ(canonicalize_json(nested_arrays(1'000'000)), std::nullopt);
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += "{\"a\":";
  EXPECT_EQ(canonicalize_json(objects), std::nullopt);
}

TEST(CanonicalJson, IgnoreRemovesTopLevelMember) {
  EXPECT_EQ(canonical(R"({"amount":1,"client_timestamp":"2024-01-01T00:00:00Z"})", {"/client_timestamp"}),
            R"({"amount":1})");
}

TEST(CanonicalJson, IgnoreRemovesNestedMember) {
  EXPECT_EQ(canonical(R"({"meta":{"trace":"x","user":7},"n":1})", {"/meta/trace"}), R"({"meta":{"user":7},"n":1})");
}

TEST(CanonicalJson, IgnoreRemovesArrayElement) {
  EXPECT_EQ(canonical(R"({"items":[10,20,30]})", {"/items/1"}), R"({"items":[10,30]})");
  EXPECT_EQ(canonical(R"([{"a":1,"t":2},{"a":3,"t":4}])", {"/1/t"}), R"([{"a":1,"t":2},{"a":3}])");
}

TEST(CanonicalJson, IgnorePointersAllAddressTheOriginalDocument) {
  // Removing /a/0 must not shift what /a/1 means.
  EXPECT_EQ(canonical(R"({"a":[0,1,2]})", {"/a/0", "/a/1"}), R"({"a":[2]})");
  EXPECT_EQ(canonical(R"({"a":{"b":1},"c":2})", {"/a", "/a/b"}), R"({"c":2})");
}

TEST(CanonicalJson, IgnoreUnescapesTildeAndSlash) {
  EXPECT_EQ(canonical(R"({"a/b":1,"m~n":2,"~1":3,"k":4})", {"/a~1b", "/m~0n"}), R"({"k":4,"~1":3})");
  EXPECT_EQ(canonical(R"({"~1":3,"/":4})", {"/~01"}), R"({"/":4})");
}

TEST(CanonicalJson, IgnoreEmptyMemberName) {
  EXPECT_EQ(canonical(R"({"":1,"a":2})", {"/"}), R"({"a":2})");
}

TEST(CanonicalJson, IgnorePointerThatAddressesNothingIsANoOp) {
  const std::string document = R"({"a":{"b":[1,2]},"s":"x"})";
  const std::string expected = R"({"a":{"b":[1,2]},"s":"x"})";
  for (const char* pointer : {"/missing", "/a/missing", "/a/b/2", "/a/b/-", "/a/b/01", "/a/b/x", "/a/b/-1",
                              "/a/b/99999999999999999999999", "/s/0", "/a/b/0/x", "no-slash", "/bad~2"}) {
    EXPECT_EQ(canonical(document, {pointer}), expected) << "pointer: " << pointer;
  }
}

TEST(CanonicalJson, IgnoreMatchesMemberNamesExactly) {
  EXPECT_EQ(canonical(R"({"A":1,"a":2})", {"/a"}), R"({"A":1})");
}

TEST(CanonicalJson, IgnoringTheWholeDocumentGivesEmptyCanonicalForm) {
  EXPECT_EQ(canonicalize_json(R"({"a":1})", {""}), std::string());
  EXPECT_EQ(canonicalize_json("[1,2]", {"", "/0"}), std::string());
  // Still only for valid JSON: anything else is hashed raw by the caller.
  EXPECT_EQ(canonicalize_json("{", {""}), std::nullopt);
}

TEST(JsonPointer, ValidPointersHaveNoError) {
  for (const char* pointer : {"", "/", "/a", "/a/b", "/a~0b", "/a~1b", "/0", "/-", "//", "/~0~1"}) {
    EXPECT_EQ(json_pointer_error(pointer), "") << "pointer: " << pointer;
  }
}

TEST(JsonPointer, InvalidPointersSayWhy) {
  EXPECT_NE(json_pointer_error("a"), "");
  EXPECT_NE(json_pointer_error("a/b"), "");
  EXPECT_NE(json_pointer_error("#/a"), "");
  EXPECT_NE(json_pointer_error("/a~"), "");
  EXPECT_NE(json_pointer_error("/a~2"), "");
  EXPECT_NE(json_pointer_error("/~/"), "");
  EXPECT_NE(json_pointer_error("a").find("'/'"), std::string::npos);
  EXPECT_NE(json_pointer_error("/a~2").find("'~'"), std::string::npos);
}

}  // namespace
}  // namespace idem::fingerprint
