#pragma once
// The suite's Redis (IDEMPROXY_TEST_REDIS_PORT, started by tests/run.sh) and a blocking client for
// setting up and looking at what the code under test wrote. Blocking I/O: test threads only.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.hpp"

struct redisContext;

namespace idem::test {

// IDEMPROXY_TEST_REDIS_PORT. Throws std::runtime_error when unset: the tests fail, never skip.
std::uint16_t suite_redis_port();

// A key prefix no other test (or earlier run) uses: "<label>-<12 hex digits>:".
std::string unique_prefix(std::string_view label);

class RedisClient {
 public:
  // Throws std::runtime_error when the server cannot be reached (or AUTH fails).
  explicit RedisClient(std::uint16_t port, const std::string& password = "");

  // Throws std::runtime_error on a connection error; an error reply is returned as a reply.
  redis::RedisReply command(const std::vector<std::string>& argv);
  // Every key matching `pattern` (SCAN, so the server is not blocked), in no particular order.
  std::vector<std::string> keys(const std::string& pattern);

 private:
  struct ContextFree {
    void operator()(redisContext* context) const;
  };
  std::unique_ptr<redisContext, ContextFree> context_;
};

}  // namespace idem::test
