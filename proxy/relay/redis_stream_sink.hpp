#pragma once
// Publishes rows to Redis Streams: one XADD per row to the stream its template names, with the
// fields event_id, event_type, aggregate_type, aggregate_id, payload, headers, created_at.
//
// Deduplicated atomically: each row is one EVALSHA of a script that XADDs only when the row's
// marker key (dedup_prefix + stream + ":" + event_id) is absent, then sets it with NX and an
// expiry of dedup_window. A relay that crashed between XADD and marking the row published
// re-publishes it after its lease; the script then adds nothing and answers "duplicate".
// The script also takes the marker of the batch's previous row of the same aggregate and adds
// nothing ("held") when that marker is missing, i.e. when that row failed: the whole batch is
// pipelined on one connection, yet an aggregate's rows never overtake each other.
// NOSCRIPT (script cache flushed, server restarted) reloads the script and re-sends once.
// Optional WAIT for replicas after each batch; falling short counts as unavailable (the batch is
// re-published later, and the markers make that free).
//
// One connection, reconnected with capped backoff (100 ms .. 5 s) after any loss.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <string>

#include "config/relay_config.hpp"
#include "redis/connection.hpp"
#include "relay/backoff.hpp"
#include "relay/sink.hpp"

namespace idem::relay {

class RedisStreamSink final : public Sink, public std::enable_shared_from_this<RedisStreamSink> {
 public:
  RedisStreamSink(boost::asio::io_context& io, config::RedisSinkConfig config);
  ~RedisStreamSink() override;

  void start() override;
  void stop() override;
  bool ready() const override { return ready_; }
  bool connecting() const override { return started_ && !stopped_ && !connected_once_ && failed_connects_ == 0; }
  std::string_view name() const override { return "redis_streams"; }
  void publish(std::shared_ptr<const std::vector<OutboxRow>> rows, std::chrono::steady_clock::time_point deadline,
               PublishHandler handler) override;

  // The script's source (tests check its behaviour directly against a server).
  static const char* script();

 private:
  struct Batch;

  void connect();
  void on_connect_failed(const std::string& why);
  void schedule_reconnect();
  void on_lost(const redis::RedisError& why);
  void send_rows(const std::shared_ptr<Batch>& batch, const std::vector<std::size_t>& indexes);
  void on_row_reply(const std::shared_ptr<Batch>& batch, std::size_t index, const redis::RedisError& error,
                    const redis::RedisReply& reply);
  void finish_sends(const std::shared_ptr<Batch>& batch);
  void wait_for_replicas(const std::shared_ptr<Batch>& batch);
  std::vector<std::string> row_command(const Batch& batch, std::size_t index) const;

  boost::asio::io_context& io_;
  config::RedisSinkConfig config_;
  std::shared_ptr<redis::RedisConnection> connection_;
  std::string script_sha_;
  bool ready_ = false;
  bool connected_once_ = false;
  bool started_ = false;
  bool stopped_ = false;
  int failed_connects_ = 0;
  Backoff reconnect_backoff_;
  boost::asio::steady_timer reconnect_timer_;
  std::uint64_t generation_ = 0;  // bumped per connection; callbacks of older ones are ignored
};

}  // namespace idem::relay
