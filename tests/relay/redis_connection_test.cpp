// RedisConnection (hiredis 0.14 on Asio) against the test Redis: pipelining, replies as values,
// deadlines, refused connections and a server that drops us.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "redis/connection.hpp"
#include "support/ports.hpp"
#include "support/random_hex.hpp"
#include "support/redis_client.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;
using redis::RedisConnection;
using redis::RedisError;
using redis::RedisErrorKind;
using redis::RedisReply;

class RedisConnectionTest : public ::testing::Test {
 protected:
  void run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(5ms);
      if (io_.stopped()) io_.restart();
    }
  }
  std::shared_ptr<RedisConnection> connect(std::uint16_t port, RedisError& result) {
    auto connection = std::make_shared<RedisConnection>(io_, [this](RedisError why) { lost_.push_back(why); });
    bool done = false;
    connection->connect("127.0.0.1", port, 2s, [&](RedisError error) {
      result = error;
      done = true;
    });
    run_until([&] { return done; });
    return connection;
  }

  boost::asio::io_context io_;
  std::vector<RedisError> lost_;
};

TEST_F(RedisConnectionTest, PipelinedRepliesArriveInOrderAsValues) {
  RedisError connected{RedisErrorKind::internal, "not run"};
  auto connection = connect(suite_redis_port(), connected);
  ASSERT_TRUE(connected.ok()) << connected.message;
  const std::string key = "t" + random_hex(10) + ":counter";
  std::vector<std::int64_t> values;
  for (int i = 0; i < 200; ++i) {
    connection->command({"INCR", key}, 2s, [&](RedisError error, RedisReply reply) {
      ASSERT_TRUE(error.ok()) << error.message;
      values.push_back(reply.integer);
    });
  }
  EXPECT_EQ(connection->in_flight(), 200u);
  RedisReply wrong_type;
  bool answered = false;
  connection->command({"LPUSH", key, "x"}, 2s, [&](RedisError error, RedisReply reply) {
    EXPECT_TRUE(error.ok()) << "an error reply is a reply, not a connection error";
    wrong_type = std::move(reply);
    answered = true;
  });
  connection->command({"DEL", key}, 2s, [](RedisError, RedisReply) {});
  run_until([&] { return answered; });
  ASSERT_EQ(values.size(), 200u);
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], static_cast<std::int64_t>(i + 1));
  EXPECT_TRUE(wrong_type.is_error_code("WRONGTYPE")) << describe(wrong_type);
  connection->close();
  EXPECT_TRUE(lost_.empty()) << "close() is not a loss";
}

TEST_F(RedisConnectionTest, RefusedConnectIsUnavailable) {
  RedisError connected;
  auto connection = connect(free_port(), connected);
  EXPECT_EQ(connected.kind, RedisErrorKind::unavailable) << connected.message;
  EXPECT_FALSE(connection->connected());
  bool answered = false;
  connection->command({"PING"}, 1s, [&](RedisError error, RedisReply) {
    EXPECT_EQ(error.kind, RedisErrorKind::unavailable);
    answered = true;
  });
  run_until([&] { return answered; });
  EXPECT_TRUE(answered);
}

TEST_F(RedisConnectionTest, ADeadlineClosesTheConnectionAndFailsWhatIsPending) {
  // A server that accepts and never answers.
  boost::asio::ip::tcp::acceptor silent(io_, {boost::asio::ip::make_address("127.0.0.1"), 0});
  boost::asio::ip::tcp::socket accepted(io_);
  silent.async_accept(accepted, [](const boost::system::error_code&) {});
  RedisError connected{RedisErrorKind::internal, "not run"};
  auto connection = connect(silent.local_endpoint().port(), connected);
  ASSERT_TRUE(connected.ok()) << connected.message;
  std::vector<RedisError> errors;
  const auto started = std::chrono::steady_clock::now();
  connection->command({"PING"}, 200ms, [&](RedisError error, RedisReply) { errors.push_back(error); });
  connection->command({"PING"}, 5s, [&](RedisError error, RedisReply) { errors.push_back(error); });
  run_until([&] { return errors.size() == 2 && !lost_.empty(); });
  const auto elapsed = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].kind, RedisErrorKind::timeout);
  EXPECT_EQ(errors[1].kind, RedisErrorKind::timeout) << "its effect is unknown too";
  EXPECT_LT(elapsed, 2s);
  EXPECT_FALSE(connection->connected());
  ASSERT_EQ(lost_.size(), 1u);
}

TEST_F(RedisConnectionTest, AServerThatDropsUsIsReportedLost) {
  RedisError connected{RedisErrorKind::internal, "not run"};
  auto connection = connect(suite_redis_port(), connected);
  ASSERT_TRUE(connected.ok()) << connected.message;
  std::int64_t id = 0;
  bool answered = false;
  connection->command({"CLIENT", "ID"}, 2s, [&](RedisError error, RedisReply reply) {
    ASSERT_TRUE(error.ok());
    id = reply.integer;
    answered = true;
  });
  run_until([&] { return answered; });
  RedisClient admin(suite_redis_port());
  admin.command({"CLIENT", "KILL", "ID", std::to_string(id)});
  run_until([&] { return !lost_.empty(); });
  ASSERT_EQ(lost_.size(), 1u);
  EXPECT_EQ(lost_[0].kind, RedisErrorKind::unavailable);
  EXPECT_FALSE(connection->connected());
}

}  // namespace
}  // namespace idem::test::relay
