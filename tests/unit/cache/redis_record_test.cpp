// The Redis replay cache's key and value layout (cache/redis_record.hpp): exact round trips, every
// damaged or truncated value refused, and values sealed with the record keys so Redis never holds
// a readable response.
#include "cache/redis_record.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "crypto/keyring.hpp"

namespace {
using idem::core::RecordState;
using idem::crypto::AeadKey;
using idem::crypto::Keyring;
using idem::cache::decode_redis_record;
using idem::cache::encode_redis_record;
using idem::cache::redis_record_key;
using idem::cache::RedisRecord;
using idem::cache::RedisRecordCodec;
using idem::cache::RedisValueProblem;

constexpr std::string_view kScope = "orders/v1:3f2a";
constexpr std::string_view kKey = "order-7731";
constexpr std::string_view kSecretBody = "{\"card\":\"4111-SECRET-1111\",\"id\":42}";

RedisRecord completed_record() {
  RedisRecord record;
  record.state = RecordState::completed;
  record.fingerprint = "v1:9c8f1e";
  record.response.status = 201;
  record.response.headers = {{"Content-Type", "application/json"}, {"X-Trace", "a: b"}, {"X-Trace", "second"}};
  // Bytes a text format would trip over: NUL, CR LF, high bytes.
  record.response.body = std::string(kSecretBody) + std::string("\0\r\n\xff\xfe", 5);
  record.expires_at_unix_ms = 1'795'000'000'123;
  return record;
}

RedisRecord too_large_record() {
  RedisRecord record;
  record.state = RecordState::too_large;
  record.fingerprint = "v1:77aa";
  record.response.status = 200;
  record.expires_at_unix_ms = 1'795'000'999'000;
  return record;
}

void expect_same(const RedisRecord& actual, const RedisRecord& expected) {
  EXPECT_EQ(actual.state, expected.state);
  EXPECT_EQ(actual.fingerprint, expected.fingerprint);
  EXPECT_EQ(actual.response.status, expected.response.status);
  EXPECT_EQ(actual.response.headers, expected.response.headers);
  EXPECT_EQ(actual.response.body, expected.response.body);
  EXPECT_EQ(actual.expires_at_unix_ms, expected.expires_at_unix_ms);
}

std::shared_ptr<const Keyring> keyring(std::string current, std::uint8_t fill = 7) {
  AeadKey key{};
  key.fill(fill);
  return std::make_shared<const Keyring>(current, std::vector<Keyring::Entry>{{current, key}});
}

TEST(RedisRecordKey, IsThePrefixAndAHashThatHidesScopeAndKey) {
  const std::string key = redis_record_key("idemproxy:replay:", kScope, kKey);
  ASSERT_TRUE(key.starts_with("idemproxy:replay:"));
  const std::string digest = key.substr(std::string_view("idemproxy:replay:").size());
  EXPECT_EQ(digest.size(), 64u);
  EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << digest;
  EXPECT_EQ(key.find(kKey), std::string::npos);
  EXPECT_EQ(key.find("3f2a"), std::string::npos);
  EXPECT_EQ(redis_record_key("idemproxy:replay:", kScope, kKey), key) << "stable";
}

TEST(RedisRecordKey, SeparatesScopeFromKey) {
  // Concatenated, these pairs are the same bytes; framed, they are different records.
  EXPECT_NE(redis_record_key("p:", "ab", "c"), redis_record_key("p:", "a", "bc"));
  EXPECT_NE(redis_record_key("p:", kScope, "k1"), redis_record_key("p:", kScope, "k2"));
  EXPECT_NE(redis_record_key("p:", "orders/v1:a", kKey), redis_record_key("p:", "orders/v1:b", kKey));
}

TEST(RedisRecordValue, CompletedRecordRoundTripsExactly) {
  const RedisRecord record = completed_record();
  const std::string value = encode_redis_record(record);
  const auto decoded = decode_redis_record(value);
  ASSERT_TRUE(decoded.has_value());
  expect_same(*decoded, record);
  EXPECT_EQ(encode_redis_record(*decoded), value);
}

TEST(RedisRecordValue, TooLargeRecordRoundTripsWithoutHeadersOrBody) {
  const RedisRecord record = too_large_record();
  const auto decoded = decode_redis_record(encode_redis_record(record));
  ASSERT_TRUE(decoded.has_value());
  expect_same(*decoded, record);
}

TEST(RedisRecordValue, EveryTruncationIsRefused) {
  const std::string value = encode_redis_record(completed_record());
  for (std::size_t size = 0; size < value.size(); ++size) {
    EXPECT_FALSE(decode_redis_record(std::string_view(value).substr(0, size)).has_value()) << "prefix of " << size;
  }
}

TEST(RedisRecordValue, TrailingBytesAreRefused) {
  EXPECT_FALSE(decode_redis_record(encode_redis_record(completed_record()) + "x").has_value());
}

TEST(RedisRecordValue, ForeignOrDamagedHeadersAreRefused) {
  const std::string good = encode_redis_record(completed_record());
  auto with_byte = [&](std::size_t at, char byte) {
    std::string value = good;
    value[at] = byte;
    return value;
  };
  EXPECT_FALSE(decode_redis_record(with_byte(0, 'X')).has_value()) << "magic";
  EXPECT_FALSE(decode_redis_record(with_byte(4, 2)).has_value()) << "version 2 is not understood";
  EXPECT_FALSE(decode_redis_record(with_byte(5, 0)).has_value()) << "state 0";
  EXPECT_FALSE(decode_redis_record(with_byte(5, 3)).has_value()) << "state 3";
  EXPECT_FALSE(decode_redis_record("").has_value());
  EXPECT_FALSE(decode_redis_record("GET nothing here").has_value());
  EXPECT_FALSE(decode_redis_record(std::string(200, '\0')).has_value());

  RedisRecord bad_status = completed_record();
  bad_status.response.status = 99;
  EXPECT_FALSE(decode_redis_record(encode_redis_record(bad_status)).has_value());
  bad_status.response.status = 600;
  EXPECT_FALSE(decode_redis_record(encode_redis_record(bad_status)).has_value());

  RedisRecord no_fingerprint = completed_record();
  no_fingerprint.fingerprint.clear();
  EXPECT_FALSE(decode_redis_record(encode_redis_record(no_fingerprint)).has_value());

  RedisRecord too_large_with_body = too_large_record();
  too_large_with_body.response.body = "should not be here";
  EXPECT_FALSE(decode_redis_record(encode_redis_record(too_large_with_body)).has_value());
}

TEST(RedisRecordValue, AnyByteOverwrittenEitherFailsOrDecodesToExactlyThoseBytes) {
  // No damaged value is ever half-read: it is refused, or it is a whole other valid value (e.g.
  // a different status), whose encoding is the damaged bytes themselves.
  const std::string good = encode_redis_record(completed_record());
  for (std::size_t at = 0; at < good.size(); ++at) {
    for (const char byte : {'\0', '\x7f', '\xff'}) {
      std::string damaged = good;
      damaged[at] = byte;
      if (const auto decoded = decode_redis_record(damaged)) {
        EXPECT_EQ(encode_redis_record(*decoded), damaged) << "byte " << at;
      }
    }
  }
}

TEST(RedisRecordValue, HugeLengthFieldsAreRefusedNotTrusted) {
  std::string value = encode_redis_record(completed_record());
  // The fingerprint's length field follows magic(4), version, state, status(2), expiry(8).
  const std::size_t length_at = 4 + 1 + 1 + 2 + 8;
  for (std::size_t i = 0; i < 4; ++i) value[length_at + i] = '\xff';
  EXPECT_FALSE(decode_redis_record(value).has_value());
}

TEST(RedisRecordCodec, WithoutEncryptionTheValueIsTheLayoutInClear) {
  const RedisRecordCodec codec(nullptr);
  const auto value = codec.seal(kScope, kKey, completed_record());
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(*value, encode_redis_record(completed_record()));
  const auto opened = codec.open(kScope, kKey, *value);
  ASSERT_EQ(opened.problem, RedisValueProblem::none);
  expect_same(opened.record, completed_record());
}

TEST(RedisRecordCodec, SealedValueHoldsNoReadableResponseAndOpensForItsOwnKey) {
  const RedisRecordCodec codec(keyring("k1"));
  const auto value = codec.seal(kScope, kKey, completed_record());
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(value->find("SECRET"), std::string::npos);
  EXPECT_EQ(value->find("application/json"), std::string::npos);
  EXPECT_EQ(value->find("X-Trace"), std::string::npos);
  EXPECT_NE(value->find("@idemproxy-sealed"), std::string::npos) << "sealed like the Postgres copy";

  const auto opened = codec.open(kScope, kKey, *value);
  ASSERT_EQ(opened.problem, RedisValueProblem::none) << opened.detail;
  expect_same(opened.record, completed_record());

  // Sealing twice gives different bytes (fresh nonce), both open.
  const auto again = codec.seal(kScope, kKey, completed_record());
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(*again, *value);
  EXPECT_EQ(codec.open(kScope, kKey, *again).problem, RedisValueProblem::none);
}

TEST(RedisRecordCodec, SealedValueMovedToAnotherRecordDoesNotOpen) {
  const RedisRecordCodec codec(keyring("k1"));
  const auto value = codec.seal(kScope, kKey, completed_record());
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(codec.open(kScope, "another-key", *value).problem, RedisValueProblem::cannot_open);
  EXPECT_EQ(codec.open("orders/v1:other-tenant", kKey, *value).problem, RedisValueProblem::cannot_open);
}

TEST(RedisRecordCodec, AlteredCiphertextOrStatusDoesNotOpen) {
  const RedisRecordCodec codec(keyring("k1"));
  const std::string value = *codec.seal(kScope, kKey, completed_record());
  std::string flipped = value;
  flipped[flipped.size() - 20] ^= 0x01;  // inside the ciphertext or tag
  EXPECT_EQ(codec.open(kScope, kKey, flipped).problem, RedisValueProblem::cannot_open);

  auto decoded = decode_redis_record(value);
  ASSERT_TRUE(decoded.has_value());
  decoded->response.status = 200;  // the status is bound to the seal
  EXPECT_EQ(codec.open(kScope, kKey, encode_redis_record(*decoded)).problem, RedisValueProblem::cannot_open);
}

TEST(RedisRecordCodec, OtherKeysOrNoKeysCannotOpen) {
  const std::string value = *RedisRecordCodec(keyring("k1", 7)).seal(kScope, kKey, completed_record());
  const auto unknown_id = RedisRecordCodec(keyring("k9", 7)).open(kScope, kKey, value);
  EXPECT_EQ(unknown_id.problem, RedisValueProblem::cannot_open);
  EXPECT_NE(unknown_id.detail.find("unknown_key"), std::string::npos) << unknown_id.detail;
  EXPECT_EQ(RedisRecordCodec(keyring("k1", 8)).open(kScope, kKey, value).problem, RedisValueProblem::cannot_open)
      << "same id, other key material";
  EXPECT_EQ(RedisRecordCodec(nullptr).open(kScope, kKey, value).problem, RedisValueProblem::sealed_no_key);
}

TEST(RedisRecordCodec, WithEncryptionOnACompletedValueInClearIsRefused) {
  const std::string clear = encode_redis_record(completed_record());
  EXPECT_EQ(RedisRecordCodec(keyring("k1")).open(kScope, kKey, clear).problem, RedisValueProblem::not_sealed);
}

TEST(RedisRecordCodec, TooLargeRecordsStayInClearAndOpenEitherWay) {
  const RedisRecordCodec codec(keyring("k1"));
  const auto value = codec.seal(kScope, kKey, too_large_record());
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(*value, encode_redis_record(too_large_record()));
  const auto opened = codec.open(kScope, kKey, *value);
  ASSERT_EQ(opened.problem, RedisValueProblem::none);
  expect_same(opened.record, too_large_record());
}

TEST(RedisRecordCodec, GarbageIsMalformed) {
  const RedisRecordCodec codec(keyring("k1"));
  EXPECT_EQ(codec.open(kScope, kKey, "").problem, RedisValueProblem::malformed);
  EXPECT_EQ(codec.open(kScope, kKey, "{\"status\":200}").problem, RedisValueProblem::malformed);
  const std::string value = *codec.seal(kScope, kKey, completed_record());
  EXPECT_EQ(codec.open(kScope, kKey, value.substr(0, value.size() - 1)).problem, RedisValueProblem::malformed);
}

}  // namespace
