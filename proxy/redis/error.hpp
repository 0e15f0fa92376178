#pragma once
// What went wrong with a Redis connection or command. A reply that Redis itself sends as an error
// ("-ERR ...", "-NOSCRIPT ...", "-WRONGTYPE ...") is not an error here: it is a RedisReply of
// kind `error`, since in a pipeline it belongs to one command, not to the connection.
#include <string>
#include <string_view>

namespace idem::redis {

enum class RedisErrorKind {
  ok,
  unavailable,  // not connected, connect failed, connection lost or closed
  timeout,      // our deadline passed; the connection was closed; the command's effect is unknown
  internal,     // a caller bug (command before connect, empty argv) or out of memory
};
std::string_view redis_error_kind_name(RedisErrorKind kind);

struct RedisError {
  RedisErrorKind kind = RedisErrorKind::ok;
  std::string message;  // for logs

  bool ok() const { return kind == RedisErrorKind::ok; }
};

}  // namespace idem::redis
