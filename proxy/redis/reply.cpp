#include "redis/reply.hpp"

#include <hiredis/hiredis.h>

namespace idem::redis {

bool RedisReply::is_error_code(std::string_view code) const {
  if (kind != Kind::error || text.size() < code.size()) return false;
  return std::string_view(text).substr(0, code.size()) == code &&
         (text.size() == code.size() || text[code.size()] == ' ');
}

RedisReply copy_reply(const redisReply& reply) {
  RedisReply out;
  switch (reply.type) {
    case REDIS_REPLY_STRING:
      out.kind = RedisReply::Kind::string;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_STATUS:
      out.kind = RedisReply::Kind::status;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_ERROR:
      out.kind = RedisReply::Kind::error;
      out.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.kind = RedisReply::Kind::integer;
      out.integer = reply.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.kind = RedisReply::Kind::array;
      out.elements.reserve(reply.elements);
      for (std::size_t i = 0; i < reply.elements; ++i) out.elements.push_back(copy_reply(*reply.element[i]));
      break;
    case REDIS_REPLY_NIL:
    default:  // hiredis 0.14 speaks RESP2 only: nothing else can arrive
      out.kind = RedisReply::Kind::nil;
      break;
  }
  return out;
}

std::string describe(const RedisReply& reply) {
  switch (reply.kind) {
    case RedisReply::Kind::nil: return "nil";
    case RedisReply::Kind::string: return "string(" + std::to_string(reply.text.size()) + ")";
    case RedisReply::Kind::status: return "status: " + reply.text;
    case RedisReply::Kind::error: return "error: " + reply.text;
    case RedisReply::Kind::integer: return "integer " + std::to_string(reply.integer);
    case RedisReply::Kind::array: return "array[" + std::to_string(reply.elements.size()) + "]";
  }
  return "nil";
}

}  // namespace idem::redis
