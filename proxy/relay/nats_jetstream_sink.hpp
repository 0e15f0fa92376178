#pragma once
// Publishes rows to NATS JetStream: one message per row on the subject its template names, the
// body the webhook envelope (HttpSink::body_for), headers Nats-Msg-Id = the event's identity,
// "<event_id>:<event_fingerprint>" (nats_message_id.hpp), and the row's checked
// traceparent/tracestate. The stream's duplicate window deduplicates a re-publish (a relay killed
// between publish and mark, a lost ack): the constructor reads the window, refuses to start when
// it is shorter than relay.lease + relay.backoff.max, the longest a row can wait before it is
// published again, and warns when it is shorter than the outages worth riding out
// (nats_duplicate_window.hpp).
//
// Subjects: each row's subject is checked against the stream's subject filters before it is
// published. One the stream does not cover is that row's failure (`retry`: an attempt charged,
// parked after max_attempts, counted in RelayStats::nats_subject_not_in_stream), never the
// server's: JetStream would answer "no responders" or another stream would store it. The filters
// are read at start and again (at most once a second) when a subject does not match them, and
// before the next batch after a "no responders" on a subject they did match (the stream was
// edited, or has no leader: that batch is `unavailable`).
//
// Order per aggregate: publishes go in rounds; a round sends the next row of every aggregate
// still going (at most max_in_flight) with js_PublishMsgAsync and waits for all their acks
// (publish_timeout); an aggregate's next row goes only after its previous one was acknowledged.
// Rows that may have a copy under an earlier version's id are probed first, the batch's probes
// together (one more round trip per max_in_flight of them, nats_message_id.hpp). No ack in time: `unavailable` for the
// unacknowledged rows and the rest of the batch (the server may have stored them: the re-publish is answered as a
// duplicate). A row larger than the server's max_payload: `poison` (parked at once, the error says the sizes).
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
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "relay/message_template.hpp"
#include "relay/sink.hpp"
#include "relay/stats.hpp"

namespace idem::relay {

// sink.nats_jetstream, as the sink uses it.
struct NatsSinkOptions {
  std::string url = "nats://127.0.0.1:4222";
  std::string stream;       // the JetStream stream the subjects belong to
  MessageTemplate subject;  // the subject a row goes to
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds publish_timeout{5'000};  // a round of publishes waits this long for acks
  std::size_t max_in_flight = 256;                   // publishes awaiting their ack at once
};

class NatsJetStreamSink final : public Sink, public std::enable_shared_from_this<NatsJetStreamSink> {
 public:
  // Connects and checks the stream (start-up only: blocks). Throws std::runtime_error with the
  // reason when the server cannot be reached, the stream does not exist, or its duplicate window
  // is shorter than `required_window` (relay.lease + relay.backoff.max). `stats` outlives the sink.
  NatsJetStreamSink(boost::asio::io_context& io, NatsSinkOptions options, std::chrono::milliseconds required_window,
                    RelayStats& stats);
  ~NatsJetStreamSink() override;

  // For --check (blocks, start-up only): one line on the stream, "nats: ...": its duplicate
  // window and what it covers, "warning: ..." when short of the recommendation, "error: ..." when
  // the relay would refuse to start, or why it could not be read.
  static std::string check_report(const NatsSinkOptions& options, std::chrono::milliseconds required_window);

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
  struct Outgoing;

  void run();
  std::vector<Delivery> publish_batch(const Job& job);
  // Sends `wave` (publishes: at most one row per aggregate; probes: any) and waits for its acks;
  // fills `deliveries`. A probe that finds no earlier copy (or another event's) leaves its row `held`.
  void send_wave(const std::vector<OutboxRow>& rows, const std::vector<std::string>& subjects,
                 const std::vector<Outgoing>& wave, std::vector<Delivery>& deliveries);
  // Re-reads the stream's subject filters; false (and `error`) when JetStream does not answer.
  bool refresh_filters(std::string& error);

  boost::asio::io_context& io_;
  NatsSinkOptions options_;
  RelayStats& stats_;
  std::unique_ptr<Nats> nats_;
  std::chrono::milliseconds window_{0};  // the stream's duplicate window, read at start
  std::int64_t started_micros_ = 0;      // Unix epoch: when this sink was made
  bool probe_earlier_copies_ = false;    // the stream stored something within a window before that
  // The sink thread's own, after start():
  std::vector<std::string> filters_;  // the stream's subjects
  std::chrono::steady_clock::time_point filters_read_at_;
  bool filters_stale_ = false;  // a covered subject got "no responders": read them before the next batch
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace idem::relay
