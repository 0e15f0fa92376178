#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "core/idempotency_key.hpp"

namespace idem::core {
namespace {

constexpr std::size_t kMaxLength = 255;

std::variant<std::string, KeyError> parse(std::vector<std::string_view> lines, std::size_t max = kMaxLength) {
  return parse_idempotency_key(lines, max);
}

std::variant<std::string, KeyError> parse_one(std::string_view value, std::size_t max = kMaxLength) {
  return parse({value}, max);
}

// Small wrappers so a failing assertion prints what was parsed.
testing::AssertionResult is_key(const std::variant<std::string, KeyError>& result, std::string_view expected) {
  if (const auto* key = std::get_if<std::string>(&result)) {
    if (*key == expected) return testing::AssertionSuccess();
    return testing::AssertionFailure() << "key '" << *key << "', expected '" << expected << "'";
  }
  return testing::AssertionFailure() << "error " << key_error_name(std::get<KeyError>(result));
}

testing::AssertionResult is_error(const std::variant<std::string, KeyError>& result, KeyError expected) {
  if (const auto* key = std::get_if<std::string>(&result)) {
    return testing::AssertionFailure() << "accepted key '" << *key << "'";
  }
  const KeyError error = std::get<KeyError>(result);
  if (error == expected) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "error " << key_error_name(error) << ", expected " << key_error_name(expected);
}

TEST(IdempotencyKey, QuotedStringIsDecoded) {
  EXPECT_TRUE(is_key(parse_one(R"("8e03978e-40d5-43e8-bc93-6894a57f9324")"), "8e03978e-40d5-43e8-bc93-6894a57f9324"));
  EXPECT_TRUE(is_key(parse_one(R"("with space and ;,=")"), "with space and ;,="));
}

TEST(IdempotencyKey, BareTokenIsAccepted) {
  EXPECT_TRUE(is_key(parse_one("8e03978e-40d5-43e8-bc93-6894a57f9324"), "8e03978e-40d5-43e8-bc93-6894a57f9324"));
  EXPECT_TRUE(is_key(parse_one("a:b/c=d+e*f~"), "a:b/c=d+e*f~"));
}

TEST(IdempotencyKey, QuotedAndBareFormsNameTheSameKey) {
  EXPECT_EQ(parse_one(R"("abc-123")"), parse_one("abc-123"));
}

TEST(IdempotencyKey, EscapedQuoteAndBackslashAreDecoded) {
  EXPECT_TRUE(is_key(parse_one(R"("a\"b\\c")"), R"(a"b\c)"));
}

TEST(IdempotencyKey, SurroundingSpacesAndTabsAreTrimmed) {
  EXPECT_TRUE(is_key(parse_one(" \t\"abc\"\t "), "abc"));
  EXPECT_TRUE(is_key(parse_one("\tabc "), "abc"));
  EXPECT_TRUE(is_key(parse_one(R"(" spaces inside stay ")"), " spaces inside stay "));
}

TEST(IdempotencyKey, NoFieldIsMissing) { EXPECT_TRUE(is_error(parse({}), KeyError::missing)); }

TEST(IdempotencyKey, BlankValuesAreEmpty) {
  EXPECT_TRUE(is_error(parse_one(""), KeyError::empty));
  EXPECT_TRUE(is_error(parse_one(" \t "), KeyError::empty));
  EXPECT_TRUE(is_error(parse_one(R"("")"), KeyError::empty));
  EXPECT_TRUE(is_error(parse_one(R"( "" )"), KeyError::empty));
}

TEST(IdempotencyKey, LengthLimitAppliesToTheDecodedKey) {
  const std::string at_limit(kMaxLength, 'k');
  const std::string over_limit(kMaxLength + 1, 'k');
  EXPECT_TRUE(is_key(parse_one(at_limit), at_limit));
  EXPECT_TRUE(is_error(parse_one(over_limit), KeyError::too_long));
  EXPECT_TRUE(is_key(parse_one('"' + at_limit + '"'), at_limit));
  EXPECT_TRUE(is_error(parse_one('"' + over_limit + '"'), KeyError::too_long));
  // 254 characters plus one escaped quote: 257 bytes on the wire, 255 decoded.
  const std::string escaped = '"' + std::string(kMaxLength - 1, 'k') + "\\\"\"";
  EXPECT_TRUE(is_key(parse_one(escaped), std::string(kMaxLength - 1, 'k') + '"'));
  EXPECT_TRUE(is_error(parse_one("abcd", 3), KeyError::too_long));
}

TEST(IdempotencyKey, BadQuotingIsMalformed) {
  EXPECT_TRUE(is_error(parse_one(R"("unterminated)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("bad \n escape")"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("trailing backslash\")"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("abc"def)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"(ab"c")"), KeyError::malformed));
}

TEST(IdempotencyKey, ControlAndNonAsciiCharactersAreMalformed) {
  EXPECT_TRUE(is_error(parse_one("\"a\tb\""), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one("\"a\x01" "b\""), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one("\"a\x7f" "b\""), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one("a\x01" "b"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one("caf\xc3\xa9"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one("\"caf\xc3\xa9\""), KeyError::malformed));
}

TEST(IdempotencyKey, WhitespaceOrSpecialsInBareFormAreMalformed) {
  EXPECT_TRUE(is_error(parse_one("two words"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one("a\tb"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"(back\slash)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(";abc"), KeyError::malformed));
}

// RFC 8941 §3.1.2: an item may carry parameters; the key is the item's value alone.
TEST(IdempotencyKey, StructuredFieldParametersAreAcceptedAndIgnored) {
  EXPECT_TRUE(is_key(parse_one(R"("k";p=1)"), "k"));
  EXPECT_TRUE(is_key(parse_one("abc;x=2"), "abc"));
  EXPECT_EQ(parse_one(R"("k";p=1)"), parse_one(R"("k")")) << "the same key, the same record";
  EXPECT_TRUE(is_key(parse_one(R"("k";a;b=?0;c=-12.5;d=tok/en:x;e="s;t,r";f=:aGk=:;g=123456789012345)"), "k"));
  EXPECT_TRUE(is_key(parse_one(R"("k"; a=1;  *b=2)"), "k")) << "spaces after each ';'";
  EXPECT_TRUE(is_key(parse_one("\"k\";p=1 \t"), "k")) << "trailing OWS";
  EXPECT_TRUE(is_key(parse_one(R"("k";p=1;p=2)"), "k")) << "a repeated parameter: the last wins, still one key";
}

TEST(IdempotencyKey, MalformedParametersAreMalformed) {
  EXPECT_TRUE(is_error(parse_one(R"("abc" ;x)"), KeyError::malformed)) << "no space before ';'";
  EXPECT_TRUE(is_error(parse_one(R"("abc";)"), KeyError::malformed)) << "';' without a parameter";
  EXPECT_TRUE(is_error(parse_one(R"("abc";X=1)"), KeyError::malformed)) << "parameter keys are lower case";
  EXPECT_TRUE(is_error(parse_one(R"("abc";1x=1)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("abc";x=)"), KeyError::malformed)) << "'=' without a value";
  EXPECT_TRUE(is_error(parse_one(R"("abc";x="open)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("abc";x=?2)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("abc";x=:aGk=)"), KeyError::malformed)) << "byte sequence without its end";
  EXPECT_TRUE(is_error(parse_one(R"("abc";x=1234567890123456)"), KeyError::malformed)) << "16 digits";
  EXPECT_TRUE(is_error(parse_one(R"("abc";x=1.2345)"), KeyError::malformed)) << "4 fraction digits";
  EXPECT_TRUE(is_error(parse_one(R"("abc";x=1.)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("abc";x=1 y)"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one("abc;x=@1"), KeyError::malformed));
}

TEST(IdempotencyKey, ParametersDoNotHideAList) {
  EXPECT_TRUE(is_error(parse_one(R"("a";p=1, "b")"), KeyError::multiple));
  EXPECT_TRUE(is_error(parse_one(R"("a", "b";p=1)"), KeyError::multiple));
  EXPECT_TRUE(is_error(parse_one("a;p=1,b"), KeyError::multiple));
  EXPECT_TRUE(is_error(parse_one(R"("a";p=1,)"), KeyError::malformed)) << "a trailing comma";
}

TEST(IdempotencyKey, TheKeyLengthIgnoresItsParameters) {
  EXPECT_TRUE(is_key(parse_one(R"("abc";padding="xxxxxxxxxxxxxxxxxxxxxxxx")", 3), "abc"));
  EXPECT_TRUE(is_error(parse_one(R"("abcd";p=1)", 3), KeyError::too_long));
}

TEST(IdempotencyKey, ListsAreMultiple) {
  EXPECT_TRUE(is_error(parse_one(R"("a", "b")"), KeyError::multiple));
  EXPECT_TRUE(is_error(parse_one(R"("a","b")"), KeyError::multiple));
  EXPECT_TRUE(is_error(parse_one("a,b"), KeyError::multiple));
  EXPECT_TRUE(is_error(parse_one("a , b"), KeyError::multiple));
  EXPECT_TRUE(is_error(parse_one(R"("", "b")"), KeyError::multiple));
}

TEST(IdempotencyKey, TrailingOrLeadingCommaIsMalformed) {
  EXPECT_TRUE(is_error(parse_one("a,"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(R"("a" , )"), KeyError::malformed));
  EXPECT_TRUE(is_error(parse_one(",a"), KeyError::malformed));
}

TEST(IdempotencyKey, TwoFieldLinesAreMultiple) {
  EXPECT_TRUE(is_error(parse({"\"a\"", "\"b\""}), KeyError::multiple));
  EXPECT_TRUE(is_error(parse({"a", "a"}), KeyError::multiple));
  EXPECT_TRUE(is_error(parse({"a", ""}), KeyError::multiple));
}

TEST(IdempotencyKey, ErrorNames) {
  EXPECT_EQ(key_error_name(KeyError::missing), "missing");
  EXPECT_EQ(key_error_name(KeyError::empty), "empty");
  EXPECT_EQ(key_error_name(KeyError::too_long), "too_long");
  EXPECT_EQ(key_error_name(KeyError::malformed), "malformed");
  EXPECT_EQ(key_error_name(KeyError::multiple), "multiple");
}

TEST(IdempotencyKey, ErrorDetailNamesTheHeaderAndTheLimit) {
  for (const KeyError error :
       {KeyError::missing, KeyError::empty, KeyError::too_long, KeyError::malformed, KeyError::multiple}) {
    EXPECT_NE(key_error_detail(error, "webhook-id", 64).find("webhook-id header"), std::string::npos)
        << key_error_name(error);
  }
  EXPECT_EQ(key_error_detail(KeyError::too_long, "Idempotency-Key", 255),
            "the Idempotency-Key header is longer than 255 characters");
}

TEST(IdempotencyKey, RuleDetailNamesTheHeaderAndTheRule) {
  EXPECT_EQ(key_rule_detail("Idempotency-Key", "be at least 16 characters long"),
            "the Idempotency-Key header must be at least 16 characters long");
}

}  // namespace
}  // namespace idem::core
