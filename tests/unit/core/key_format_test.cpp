// The route owner's key rule: formats (any, uuid, ulid, regex) and the minimum length.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <variant>

#include "core/key_format.hpp"
#include "core/key_source.hpp"

namespace idem::core {
namespace {

KeyFormat format_of(std::string_view text) {
  std::variant<KeyFormat, std::string> parsed = parse_key_format(text);
  if (const auto* error = std::get_if<std::string>(&parsed)) ADD_FAILURE() << text << ": " << *error;
  return std::get_if<KeyFormat>(&parsed) != nullptr ? std::get<KeyFormat>(parsed) : KeyFormat{};
}

std::string parse_error(std::string_view text) {
  std::variant<KeyFormat, std::string> parsed = parse_key_format(text);
  return std::holds_alternative<std::string>(parsed) ? std::get<std::string>(parsed) : std::string("(parsed)");
}

bool accepts(std::string_view format, std::string_view key, std::size_t min_length = 1) {
  return !broken_key_rule(key, min_length, format_of(format)).has_value();
}

TEST(KeyFormat, AnyAcceptsEveryKeyAsBefore) {
  EXPECT_EQ(format_of("any").kind, KeyFormatKind::any);
  EXPECT_TRUE(accepts("any", "x"));
  EXPECT_TRUE(accepts("any", "not a uuid at all"));
  EXPECT_EQ(KeyFormat{}.kind, KeyFormatKind::any) << "the default";
}

TEST(KeyFormat, UuidIsTheExactTextualShapeInEitherCase) {
  EXPECT_TRUE(accepts("uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324"));
  EXPECT_TRUE(accepts("uuid", "8E03978E-40D5-43E8-BC93-6894A57F9324"));
  EXPECT_TRUE(accepts("uuid", "8e03978E-40d5-43E8-bc93-6894A57f9324")) << "mixed case";
  EXPECT_FALSE(accepts("uuid", "8e03978e40d543e8bc936894a57f9324")) << "no hyphens";
  EXPECT_FALSE(accepts("uuid", "{8e03978e-40d5-43e8-bc93-6894a57f9324}")) << "braces";
  EXPECT_FALSE(accepts("uuid", "urn:uuid:8e03978e-40d5-43e8-bc93-6894a57f9324")) << "URN form";
  EXPECT_FALSE(accepts("uuid", "8e03978e-40d5-43e8-bc93-6894a57f932")) << "35 characters";
  EXPECT_FALSE(accepts("uuid", "8e03978e-40d5-43e8-bc93-6894a57f93245")) << "37 characters";
  EXPECT_FALSE(accepts("uuid", "8e03978e-40d5-43e8-bc9-36894a57f9324")) << "a hyphen out of place";
  EXPECT_FALSE(accepts("uuid", "8e03978g-40d5-43e8-bc93-6894a57f9324")) << "not hex";
  EXPECT_FALSE(accepts("uuid", "8e03978e_40d5_43e8_bc93_6894a57f9324"));
  EXPECT_FALSE(accepts("uuid", ""));
}

TEST(KeyFormat, UuidAcceptsEveryVersionAndVariant) {
  EXPECT_TRUE(accepts("uuid", "0190b4a2-6f0e-7c3a-9d1e-3b5f8a2c4d6e")) << "v7";
  EXPECT_TRUE(accepts("uuid", "c232ab00-9414-11ec-b3c8-9e6bdeced846")) << "v1";
  EXPECT_TRUE(accepts("uuid", "00000000-0000-0000-0000-000000000000")) << "nil";
  EXPECT_TRUE(accepts("uuid", "ffffffff-ffff-ffff-ffff-ffffffffffff")) << "max";
  EXPECT_TRUE(accepts("uuid", "8e03978e-40d5-f3e8-cc93-6894a57f9324")) << "version f, variant c: shape only";
}

TEST(KeyFormat, UlidIsCrockfordBase32WithATopCharacterOfAtMost7) {
  EXPECT_TRUE(accepts("ulid", "01ARZ3NDEKTSV4RRFFQ69G5FAV"));
  EXPECT_TRUE(accepts("ulid", "01arz3ndektsv4rrffq69g5fav")) << "lower case";
  EXPECT_TRUE(accepts("ulid", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ")) << "the largest ULID";
  EXPECT_TRUE(accepts("ulid", "00000000000000000000000000"));
  EXPECT_FALSE(accepts("ulid", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ")) << "past 128 bits";
  EXPECT_FALSE(accepts("ulid", "01ARZ3NDEKTSV4RRFFQ69G5FA")) << "25 characters";
  EXPECT_FALSE(accepts("ulid", "01ARZ3NDEKTSV4RRFFQ69G5FAVX")) << "27 characters";
  for (const char letter : std::string("ILOUilou")) {
    std::string key = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    key[5] = letter;
    EXPECT_FALSE(accepts("ulid", key)) << letter << " is not in Crockford's alphabet";
  }
  EXPECT_FALSE(accepts("ulid", "01ARZ3NDEKTSV4RRFFQ69G5FA-"));
}

TEST(KeyFormat, RegexIsAFullMatch) {
  const KeyFormat format = format_of("regex:ord_[0-9a-f]{8}");
  EXPECT_EQ(format.kind, KeyFormatKind::regex);
  EXPECT_EQ(format.pattern, "ord_[0-9a-f]{8}");
  EXPECT_TRUE(accepts("regex:ord_[0-9a-f]{8}", "ord_0123abcd"));
  EXPECT_FALSE(accepts("regex:ord_[0-9a-f]{8}", "ord_0123abcd9")) << "a longer key: no partial match";
  EXPECT_FALSE(accepts("regex:ord_[0-9a-f]{8}", "xord_0123abcd")) << "a prefix: no search";
  EXPECT_FALSE(accepts("regex:ord_[0-9a-f]{8}", "ord_0123ABCD")) << "case-sensitive";
  EXPECT_TRUE(accepts("regex:^[a-z]+$", "abc")) << "explicit anchors are harmless";
  EXPECT_TRUE(accepts("regex:a|b", "b"));
  EXPECT_FALSE(accepts("regex:a|b", "ab")) << "the alternation is matched whole";
}

TEST(KeyFormat, CopiesOfARouteShareItsCompiledPattern) {
  const KeyFormat format = format_of("regex:[a-z]+");
  const KeyFormat copy = format;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the point
  EXPECT_EQ(copy.compiled.get(), format.compiled.get());
  EXPECT_FALSE(broken_key_rule("abc", 1, copy));
}

TEST(KeyFormat, ARegexFormatWithoutItsCompiledPatternRefusesEveryKey) {
  KeyFormat format;
  format.kind = KeyFormatKind::regex;
  format.pattern = ".*";
  EXPECT_TRUE(broken_key_rule("anything", 1, format));
}

TEST(KeyFormat, BadFormatsSayWhy) {
  EXPECT_EQ(parse_error("guid"), "expected any, uuid, ulid or \"regex:<regular expression>\"");
  EXPECT_EQ(parse_error("UUID"), "expected any, uuid, ulid or \"regex:<regular expression>\"") << "lower case";
  EXPECT_EQ(parse_error(""), "expected any, uuid, ulid or \"regex:<regular expression>\"");
  EXPECT_EQ(parse_error("regex:"), "the regular expression after \"regex:\" is empty");
  // The library's own words name the problem (libstdc++'s, on the Debian 12 the project builds on).
  const std::string invalid = "not a valid ECMAScript regular expression: ";
  EXPECT_EQ(parse_error("regex:[a-z"), invalid + "Unexpected character within '[...]' in regular expression");
  EXPECT_EQ(parse_error("regex:(a"), invalid + "Mismatched '(' and ')' in regular expression");
  EXPECT_EQ(parse_error("regex:[z-a]"), invalid + "Invalid range in bracket expression.");
  EXPECT_EQ(parse_error("regex:a{2,1}"), invalid + "Invalid range in '{}' in regular expression");
  EXPECT_EQ(parse_error("regex:\\1"), invalid + "Back-reference index exceeds current sub-expression count.");
}

TEST(KeyFormat, MinimumLengthIsCheckedAfterTheFormat) {
  EXPECT_EQ(broken_key_rule("abcdefghijklmno", 16, KeyFormat{}), "be at least 16 characters long");
  EXPECT_EQ(broken_key_rule("abcdefghijklmnop", 16, KeyFormat{}), std::nullopt) << "exactly the minimum";
  EXPECT_EQ(broken_key_rule("a", 1, KeyFormat{}), std::nullopt) << "the default minimum is today's";
  // A key that breaks both is told the format, the more useful rule.
  EXPECT_EQ(broken_key_rule("short", 16, format_of("regex:[0-9]+")), "match the regular expression [0-9]+");
  EXPECT_EQ(broken_key_rule("12345", 16, format_of("regex:[0-9]+")), "be at least 16 characters long");
}

TEST(KeyFormat, TheRuleIsNamedInTheDetail) {
  EXPECT_EQ(broken_key_rule("nope", 1, format_of("uuid")),
            "be a UUID (8-4-4-4-12 hexadecimal digits, e.g. 0190b4a2-6f0e-7c3a-9d1e-3b5f8a2c4d6e)");
  EXPECT_EQ(broken_key_rule("nope", 1, format_of("ulid")),
            "be a ULID (26 characters of Crockford's base32, the first 0-7, e.g. 01ARZ3NDEKTSV4RRFFQ69G5FAV)");
  EXPECT_EQ(broken_key_rule("nope", 1, format_of("regex:^ord_[0-9]+$")), "match the regular expression ^ord_[0-9]+$");
  EXPECT_EQ(body_key_rule_detail("/id", "be a UUID (…)"),
            "the JSON body's /id (the idempotency key) must be a UUID (…)");
}

TEST(KeyFormat, FixedLengthFormatsSayTheirLength) {
  EXPECT_EQ(key_format_length(format_of("uuid")), 36u);
  EXPECT_EQ(key_format_length(format_of("ulid")), 26u);
  EXPECT_EQ(key_format_length(format_of("any")), std::nullopt);
  EXPECT_EQ(key_format_length(format_of("regex:.{10}")), std::nullopt);
}

TEST(KeyFormat, APathologicalPatternOnALongKeyIsRefusedNotThrown) {
  // Nested quantifiers backtrack exponentially; libstdc++ may give up (error_complexity or
  // error_stack) or answer no match: either way the key is refused and nothing is thrown.
  const KeyFormat format = format_of("regex:(a|aa)+b");
  EXPECT_NO_THROW({ EXPECT_TRUE(broken_key_rule(std::string(26, 'a'), 1, format)); });
}

}  // namespace
}  // namespace idem::core
