#pragma once
// A Redis reply as an owned value: hiredis frees its own reply as soon as the callback returns,
// and our handlers run later (posted), so every reply is copied out first.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct redisReply;

namespace idem::redis {

struct RedisReply {
  enum class Kind { nil, string, status, error, integer, array };

  Kind kind = Kind::nil;
  std::string text;                  // string, status and error replies
  std::int64_t integer = 0;          // integer replies
  std::vector<RedisReply> elements;  // array replies

  bool is_error() const { return kind == Kind::error; }
  // An error reply whose code (first word) is `code`, e.g. "NOSCRIPT".
  bool is_error_code(std::string_view code) const;
};

RedisReply copy_reply(const redisReply& reply);

// For logs: "string(5)", "error: WRONGTYPE ...", "array[3]".
std::string describe(const RedisReply& reply);

}  // namespace idem::redis
