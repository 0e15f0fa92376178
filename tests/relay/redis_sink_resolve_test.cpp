// The Redis stream sink resolves its host name without blocking the io thread: it connects through
// redis::RedisSession, whose lookup runs on Asio's resolver thread. The name is answered by
// slow_resolver (held until the test lets it go) and the server is the suite's Redis.
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "config/relay_config_loader.hpp"
#include "relay/redis_stream_sink.hpp"
#include "relay/slow_resolver.hpp"
#include "support/random_hex.hpp"
#include "support/redis_client.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;
using idem::relay::DeliveryOutcome;

class RedisSinkResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = "t" + random_hex(10);
    io_thread_ = std::thread([this] {
      io_thread_id_ = std::this_thread::get_id();
      io_.run();
      io_done_ = true;
    });
  }
  void TearDown() override {
    slow_resolver::release();
    boost::asio::post(io_, [this] {
      ticker_.cancel();
      if (sink_) sink_->stop();
      guard_.reset();
    });
    // Bounded: whatever a failed test left waiting must not hang the binary.
    for (int i = 0; i < 500 && !io_done_; ++i) std::this_thread::sleep_for(10ms);
    if (!io_done_) io_.stop();
    io_thread_.join();
    RedisClient redis(suite_redis_port());
    std::vector<std::string> del = {"DEL"};
    for (std::string& key : redis.keys(prefix_ + "*")) del.push_back(std::move(key));
    if (del.size() > 1) redis.command(del);
  }
  // Runs `what` on the io thread; nullopt when it did not get to run within `timeout`.
  template <class F>
  auto on_io(F what, std::chrono::milliseconds timeout = 2s) -> std::optional<decltype(what())> {
    auto promise = std::make_shared<std::promise<decltype(what())>>();
    auto future = promise->get_future();
    boost::asio::post(io_, [promise, what = std::move(what)] { promise->set_value(what()); });
    if (future.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return future.get();
  }
  void tick() {
    ticker_.expires_after(10ms);
    ticker_.async_wait([this](const boost::system::error_code& error) {
      if (error) return;
      ++ticks_;
      tick();
    });
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_ = boost::asio::make_work_guard(io_);
  boost::asio::steady_timer ticker_{io_};
  std::atomic<int> ticks_{0};
  std::atomic<bool> io_done_{false};
  std::thread io_thread_;
  std::thread::id io_thread_id_;
  std::string prefix_;
  std::shared_ptr<idem::relay::RedisStreamSink> sink_;
};

TEST_F(RedisSinkResolve, AHostNameResolvesOffTheIoThreadWhichKeepsServingMeanwhile) {
  idem::relay::RedisSinkOptions options;
  options.host = "redis.slow.test";
  options.port = suite_redis_port();
  options.connect_timeout = 10s;  // the held lookup stays well inside it
  options.command_timeout = 2s;
  std::string error;
  options.stream = *config::parse_message_template(prefix_ + ".{aggregate_type}", error);
  options.dedup_prefix = prefix_ + ":pub:";
  sink_ = std::make_shared<idem::relay::RedisStreamSink>(io_, options);

  slow_resolver::hold();
  boost::asio::post(io_, [this] {
    tick();
    sink_->start();
  });
  ASSERT_TRUE(slow_resolver::wait_entered(5s)) << "the sink looked its host name up";
  const int before = ticks_.load();
  std::this_thread::sleep_for(500ms);
  const int while_resolving = ticks_.load() - before;
  const auto state = on_io([this] { return std::make_pair(sink_->ready(), sink_->connecting()); });
  slow_resolver::release();

  EXPECT_GE(while_resolving, 10) << "the io thread kept serving its timers while the name resolved";
  EXPECT_NE(slow_resolver::caller(), io_thread_id_) << "the lookup ran on another thread";
  ASSERT_TRUE(state.has_value()) << "the io thread answered while the name resolved";
  EXPECT_FALSE(state->first) << "not ready before the name resolved";
  EXPECT_TRUE(state->second) << "still making its first connection: the relay waits rather than backs off";

  // Once resolved, it connects and publishes.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (on_io([this] { return sink_->ready(); }) != std::optional<bool>(true) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  auto rows = std::make_shared<std::vector<idem::relay::OutboxRow>>();
  rows->push_back({.id = 1,
                   .aggregate_type = "order",
                   .aggregate_id = "42",
                   .event_type = "order.paid",
                   .payload = "{}",
                   .headers = "{}",
                   .created_at = "2026-01-02T03:04:05.000001Z",
                   .created_at_micros = 1,
                   .attempts = 0,
                   .traceparent = {},
                   .tracestate = {}});
  auto published = std::make_shared<std::promise<std::vector<idem::relay::Delivery>>>();
  auto result = published->get_future();
  boost::asio::post(io_, [this, rows, published] {
    sink_->publish(rows, std::chrono::steady_clock::now() + 10s,
                   [published](std::vector<idem::relay::Delivery> deliveries) { published->set_value(deliveries); });
  });
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  const std::vector<idem::relay::Delivery> deliveries = result.get();
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].outcome, DeliveryOutcome::delivered) << deliveries[0].error;
  RedisClient redis(suite_redis_port());
  EXPECT_EQ(redis.command({"XLEN", prefix_ + ".order"}).integer, 1);
}

}  // namespace
}  // namespace idem::test::relay
