#pragma once
// Publishes rows to NATS JetStream: one message per row on the subject its template names, the
// body the webhook envelope (HttpSink::body_for), headers Nats-Msg-Id = the event id (and the
// row's checked traceparent/tracestate). The stream's duplicate window deduplicates a re-publish
// (a relay killed between publish and mark, a lost ack): the constructor reads the window and
// refuses to start when it is shorter than relay.lease + relay.backoff.max, the longest a row can
// wait before it is published again.
//
// Order per aggregate: publishes go in rounds; a round sends the next row of every aggregate
// still going (at most max_in_flight) with js_PublishMsgAsync and waits for all their acks
// (publish_timeout); an aggregate's next row goes only after its previous one was acknowledged.
// No ack in time: `unavailable` for the unacknowledged rows and the rest of the batch (the server
// may have stored them: the re-publish is answered as a duplicate). A row larger than the server's
// max_payload: `poison` (parked at once, the error says the sizes).
//
// Threads: libnats runs its own (socket reader, flusher, ack delivery) and its calls block, so the
// sink confines it to one thread of its own behind a job queue; publish() queues the batch and
// the handler is posted back to the io thread. Writing an Asio adapter for libnats was the
// alternative: its event-loop hooks cover the socket only, the JetStream ack callbacks would
// still arrive on a libnats thread, and its reconnect logic expects its own timers.
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "config/relay_config.hpp"
#include "relay/sink.hpp"

namespace idem::relay {

class NatsJetStreamSink final : public Sink, public std::enable_shared_from_this<NatsJetStreamSink> {
 public:
  // Connects and checks the stream (start-up only: blocks). Throws std::runtime_error with the
  // reason when the server cannot be reached, the stream does not exist, or its duplicate window
  // is shorter than `required_window`.
  NatsJetStreamSink(boost::asio::io_context& io, config::NatsSinkConfig config,
                    std::chrono::milliseconds required_window);
  ~NatsJetStreamSink() override;

  void start() override;
  void stop() override;
  bool ready() const override;
  std::string_view name() const override { return "nats_jetstream"; }
  void publish(std::shared_ptr<const std::vector<OutboxRow>> rows, std::chrono::steady_clock::time_point deadline,
               PublishHandler handler) override;

 private:
  struct Nats;  // the libnats handles and the ack board
  struct Job {
    std::shared_ptr<const std::vector<OutboxRow>> rows;
    std::chrono::steady_clock::time_point deadline;
    PublishHandler handler;
  };

  void run();
  std::vector<Delivery> publish_batch(const Job& job);

  boost::asio::io_context& io_;
  config::NatsSinkConfig config_;
  std::unique_ptr<Nats> nats_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace idem::relay
