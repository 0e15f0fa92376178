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
// The connection is a redis::RedisSession (the replay cache's): the host name resolved off the io
// thread, AUTH/SELECT/PING before it counts as up, reconnected with a capped, jittered backoff
// (100 ms .. 5 s) after any loss. Each time it comes up the script is loaded (SCRIPT LOAD) before
// the sink reports ready; a load refused by the server is tried again every second.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "redis/session.hpp"
#include "relay/message_template.hpp"
#include "relay/sink.hpp"

namespace idem::relay {

// sink.redis_streams, as the sink uses it.
struct RedisSinkOptions {
  std::string host;  // an address or a name
  std::uint16_t port = 6379;
  std::string password;   // AUTH on connect when not empty
  unsigned database = 0;  // SELECT on connect when not 0
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds command_timeout{5'000};
  MessageTemplate stream;                                    // the stream a row goes to
  std::uint64_t maxlen = 0;                                  // XADD MAXLEN ~ N when not 0
  std::chrono::milliseconds dedup_window{24LL * 3'600'000};  // a re-publish within it adds nothing
  std::string dedup_prefix = "idemrelay:published:";
  unsigned wait_replicas = 0;  // WAIT for this many replicas after each batch
  std::chrono::milliseconds wait_timeout{1'000};
};

class RedisStreamSink final : public Sink, public std::enable_shared_from_this<RedisStreamSink> {
 public:
  RedisStreamSink(boost::asio::io_context& io, RedisSinkOptions options);
  ~RedisStreamSink() override;

  void start() override;
  void stop() override;
  bool ready() const override { return script_loaded_ && session_ && session_->ready(); }
  bool connecting() const override {
    return started_ && !stopped_ && !loaded_once_ && (!session_ || session_->failed_attempts() == 0);
  }
  std::string_view name() const override { return "redis_streams"; }
  void publish(std::shared_ptr<const std::vector<OutboxRow>> rows, std::chrono::steady_clock::time_point deadline,
               PublishHandler handler) override;

  // The script's source (tests check its behaviour directly against a server).
  static const char* script();

 private:
  struct Batch;

  void on_session_state(bool up);
  void load_script();
  void send_rows(const std::shared_ptr<Batch>& batch, const std::vector<std::size_t>& indexes);
  void on_row_reply(const std::shared_ptr<Batch>& batch, std::size_t index, const redis::RedisError& error,
                    const redis::RedisReply& reply);
  void finish_sends(const std::shared_ptr<Batch>& batch);
  void wait_for_replicas(const std::shared_ptr<Batch>& batch);
  std::vector<std::string> row_command(const Batch& batch, std::size_t index) const;

  boost::asio::io_context& io_;
  RedisSinkOptions options_;
  std::shared_ptr<redis::RedisSession> session_;  // made by start()
  std::string script_sha_;
  bool script_loaded_ = false;  // on the session's current connection
  bool loaded_once_ = false;
  bool started_ = false;
  bool stopped_ = false;
  boost::asio::steady_timer reload_timer_;  // a refused SCRIPT LOAD is tried again
  std::uint64_t generation_ = 0;            // bumped each time the session goes up or down
};

}  // namespace idem::relay
