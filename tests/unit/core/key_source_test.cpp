#include "core/key_source.hpp"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace idem::core {
namespace {

BodyKeyLookup found(JsonKind kind, std::string value = {}) { return {kind, std::move(value)}; }

TEST(KeySource, TheHeaderWinsWhenSentUnlessTheRouteReadsTheBodyOnly) {
  EXPECT_EQ(key_origin(KeySource::header, true), KeyOrigin::header);
  EXPECT_EQ(key_origin(KeySource::header, false), KeyOrigin::header);
  EXPECT_EQ(key_origin(KeySource::header_then_json, true), KeyOrigin::header);
  EXPECT_EQ(key_origin(KeySource::header_then_json, false), KeyOrigin::json_body);
  EXPECT_EQ(key_origin(KeySource::json, true), KeyOrigin::json_body);
  EXPECT_EQ(key_origin(KeySource::json, false), KeyOrigin::json_body);
}

TEST(BodyKey, AStringIsTheKeyAsDecoded) {
  EXPECT_EQ(std::get<std::string>(body_key(found(JsonKind::string, "evt_123"), 255)), "evt_123");
  EXPECT_EQ(std::get<std::string>(body_key(found(JsonKind::string, "caf\xc3\xa9 \"1\""), 255)), "caf\xc3\xa9 \"1\"");
  EXPECT_EQ(std::get<std::string>(body_key(found(JsonKind::string, std::string(255, 'k')), 255)),
            std::string(255, 'k'));
}

TEST(BodyKey, EveryUnusableValueIsTheKeyErrorAHeaderWouldGet) {
  EXPECT_EQ(std::get<KeyError>(body_key(found(JsonKind::absent), 255)), KeyError::missing);
  EXPECT_EQ(std::get<KeyError>(body_key(found(JsonKind::string, ""), 255)), KeyError::empty);
  EXPECT_EQ(std::get<KeyError>(body_key(found(JsonKind::string, std::string(256, 'k')), 255)), KeyError::too_long);
  EXPECT_EQ(std::get<KeyError>(body_key(found(JsonKind::string, std::string("a\0b", 3)), 255)), KeyError::malformed);
  EXPECT_EQ(std::get<KeyError>(body_key(found(JsonKind::string, "a\nb"), 255)), KeyError::malformed);
  for (const JsonKind kind :
       {JsonKind::not_json, JsonKind::null, JsonKind::boolean, JsonKind::number, JsonKind::array, JsonKind::object}) {
    EXPECT_EQ(std::get<KeyError>(body_key(found(kind), 255)), KeyError::malformed) << static_cast<int>(kind);
  }
}

TEST(BodyKey, DetailsNameThePointerAndWhatWasFound) {
  EXPECT_EQ(body_key_error_detail(KeyError::malformed, found(JsonKind::number), "/id", 255),
            "the JSON body's /id (the idempotency key) is a number, not a string");
  EXPECT_EQ(body_key_error_detail(KeyError::missing, found(JsonKind::absent), "/data/id", 255),
            "the JSON body's /data/id holds the idempotency key on this route and the body has none");
  EXPECT_EQ(body_key_error_detail(KeyError::too_long, found(JsonKind::string, std::string(300, 'k')), "/id", 255),
            "the JSON body's /id (the idempotency key) is longer than 255 bytes");
  EXPECT_EQ(body_key_error_detail(KeyError::malformed, found(JsonKind::not_json), "/id", 255),
            "this route reads the idempotency key from the JSON body's /id, and the body is not JSON (it needs "
            "Content-Type application/json or *+json and a valid JSON text)");
}

}  // namespace
}  // namespace idem::core
