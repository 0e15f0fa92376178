#include "support/redis_client.hpp"

#include <hiredis/hiredis.h>

#include <charconv>
#include <stdexcept>

#include "support/env.hpp"
#include "support/random_hex.hpp"

namespace idem::test {
namespace {

struct ReplyFree {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};

}  // namespace

std::uint16_t suite_redis_port() {
  const auto text = env_var("IDEMPROXY_TEST_REDIS_PORT");
  int port = 0;
  if (!text || std::from_chars(text->data(), text->data() + text->size(), port).ec != std::errc{} || port <= 0 ||
      port > 65'535) {
    throw std::runtime_error("IDEMPROXY_TEST_REDIS_PORT is not set: run these tests through tests/run.sh");
  }
  return static_cast<std::uint16_t>(port);
}

std::string unique_prefix(std::string_view label) { return std::string(label) + "-" + random_hex(12) + ":"; }

void RedisClient::ContextFree::operator()(redisContext* context) const { redisFree(context); }

RedisClient::RedisClient(std::uint16_t port, const std::string& password) {
  const timeval timeout{5, 0};
  context_.reset(redisConnectWithTimeout("127.0.0.1", port, timeout));
  if (!context_ || context_->err != 0) {
    const std::string error = context_ ? context_->errstr : "out of memory";
    throw std::runtime_error("redis connect to port " + std::to_string(port) + ": " + error);
  }
  redisSetTimeout(context_.get(), timeout);
  if (!password.empty()) {
    const redis::RedisReply reply = command({"AUTH", password});
    if (reply.is_error()) throw std::runtime_error("redis AUTH: " + reply.text);
  }
}

redis::RedisReply RedisClient::command(const std::vector<std::string>& argv) {
  std::vector<const char*> arguments;
  std::vector<std::size_t> lengths;
  for (const std::string& argument : argv) {
    arguments.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  const std::unique_ptr<redisReply, ReplyFree> reply(static_cast<redisReply*>(
      redisCommandArgv(context_.get(), static_cast<int>(arguments.size()), arguments.data(), lengths.data())));
  if (!reply) throw std::runtime_error("redis: " + std::string(context_->errstr));
  return redis::copy_reply(*reply);
}

std::vector<std::string> RedisClient::keys(const std::string& pattern) {
  std::vector<std::string> found;
  std::string cursor = "0";
  // Bounded: a test database holds far fewer keys than this many pages.
  for (int page = 0; page < 10'000; ++page) {
    const redis::RedisReply reply = command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (reply.kind != redis::RedisReply::Kind::array || reply.elements.size() != 2) {
      throw std::runtime_error("SCAN answered " + redis::describe(reply));
    }
    cursor = reply.elements[0].text;
    for (const redis::RedisReply& key : reply.elements[1].elements) found.push_back(key.text);
    if (cursor == "0") break;
  }
  return found;
}

}  // namespace idem::test
