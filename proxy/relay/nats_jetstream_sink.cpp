#include "relay/nats_jetstream_sink.hpp"

#include <boost/asio/post.hpp>

#include <nats/nats.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "log/log.hpp"
#include "relay/http_sink.hpp"
#include "relay/message_template.hpp"

namespace idem::relay {
namespace {

constexpr int kReconnectWaitMs = 200;

std::string status_text(natsStatus status) {
  const char* last = nats_GetLastError(nullptr);
  return std::string(natsStatus_GetText(status)) + (last != nullptr && *last != '\0' ? std::string(": ") + last : "");
}

// Nats-Msg-Id: the event's identity, as the Redis sink's marker uses it; the stream deduplicates
// a re-publish of the same event on it.
std::string message_id(const OutboxRow& row) { return std::to_string(row.id); }

// The acks of the round in progress, filled in on libnats's ack thread.
struct AckBoard {
  std::mutex mutex;
  std::unordered_map<std::string, std::optional<Delivery>> round;  // Nats-Msg-Id -> outcome once acked
};

void on_ack(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void* closure) {
  auto* board = static_cast<AckBoard*>(closure);
  const char* id = nullptr;
  if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr) {
    Delivery delivery;
    if (ack != nullptr) {
      delivery.outcome = ack->Duplicate ? DeliveryOutcome::duplicate : DeliveryOutcome::delivered;
    } else if (error != nullptr && (error->Err == NATS_TIMEOUT || error->Err == NATS_NO_RESPONDERS ||
                                    error->Err == NATS_CONNECTION_CLOSED)) {
      delivery = {DeliveryOutcome::unavailable, std::string("JetStream: ") + natsStatus_GetText(error->Err)};
    } else {
      delivery = {DeliveryOutcome::retry,
                  std::string("JetStream refused the message: ") +
                      (error != nullptr && error->ErrText != nullptr ? error->ErrText : "no reason given")};
    }
    const std::lock_guard lock(board->mutex);
    if (const auto it = board->round.find(id); it != board->round.end()) it->second = std::move(delivery);
  }
  natsMsg_Destroy(msg);
}

}  // namespace

struct NatsJetStreamSink::Nats {
  natsOptions* options = nullptr;
  natsConnection* connection = nullptr;
  jsCtx* js = nullptr;
  AckBoard board;

  ~Nats() {
    if (js != nullptr) jsCtx_Destroy(js);
    if (connection != nullptr) {
      natsConnection_Close(connection);
      natsConnection_Destroy(connection);
    }
    if (options != nullptr) natsOptions_Destroy(options);
  }
};

NatsJetStreamSink::NatsJetStreamSink(boost::asio::io_context& io, config::NatsSinkConfig config,
                                     std::chrono::milliseconds required_window)
    : io_(io), config_(std::move(config)), nats_(std::make_unique<Nats>()) {
  const auto fail = [&](const std::string& what, natsStatus status) {
    throw std::runtime_error("sink.nats_jetstream: " + what + ": " + status_text(status));
  };
  natsStatus status = natsOptions_Create(&nats_->options);
  if (status == NATS_OK) status = natsOptions_SetURL(nats_->options, config_.url.c_str());
  if (status == NATS_OK) status = natsOptions_SetTimeout(nats_->options, config_.connect_timeout.count());
  if (status == NATS_OK) status = natsOptions_SetAllowReconnect(nats_->options, true);
  if (status == NATS_OK) status = natsOptions_SetMaxReconnect(nats_->options, -1);  // forever
  if (status == NATS_OK) status = natsOptions_SetReconnectWait(nats_->options, kReconnectWaitMs);
  if (status != NATS_OK) fail("options", status);
  status = natsConnection_Connect(&nats_->connection, nats_->options);
  if (status != NATS_OK) fail("connect to " + config_.url, status);
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.PublishAsync.AckHandler = on_ack;
  js_options.PublishAsync.AckHandlerClosure = &nats_->board;
  js_options.PublishAsync.MaxPending = static_cast<int64_t>(config_.max_in_flight);
  status = natsConnection_JetStream(&nats_->js, nats_->connection, &js_options);
  if (status != NATS_OK) fail("JetStream context", status);
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  status = js_GetStreamInfo(&info, nats_->js, config_.stream.c_str(), nullptr, &code);
  if (status != NATS_OK) fail("stream \"" + config_.stream + "\"", status);
  const auto window = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::nanoseconds(info->Config != nullptr ? info->Config->Duplicates : 0));
  jsStreamInfo_Destroy(info);
  if (window < required_window) {
    throw std::runtime_error("sink.nats_jetstream: stream \"" + config_.stream + "\" deduplicates over " +
                             std::to_string(window.count()) + " ms (duplicate_window), shorter than relay.lease + " +
                             "relay.backoff.max (" + std::to_string(required_window.count()) +
                             " ms): a row published again after that long would be stored twice");
  }
  log::info("nats_connected", {{"url", config_.url},
                               {"stream", config_.stream},
                               {"duplicate_window_ms", static_cast<std::int64_t>(window.count())}});
}

NatsJetStreamSink::~NatsJetStreamSink() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void NatsJetStreamSink::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void NatsJetStreamSink::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
}

bool NatsJetStreamSink::ready() const {
  return nats_->connection != nullptr && natsConnection_Status(nats_->connection) == NATS_CONN_STATUS_CONNECTED;
}

void NatsJetStreamSink::publish(std::shared_ptr<const std::vector<OutboxRow>> rows,
                                std::chrono::steady_clock::time_point deadline, PublishHandler handler) {
  {
    const std::lock_guard lock(mutex_);
    if (!stopping_) {
      jobs_.push_back(Job{std::move(rows), deadline, std::move(handler)});
      wake_.notify_one();
      return;
    }
  }
  std::vector<Delivery> stopped(rows->size(), Delivery{DeliveryOutcome::unavailable, "sink stopped"});
  boost::asio::post(
      io_, [handler = std::move(handler), stopped = std::move(stopped)]() mutable { handler(std::move(stopped)); });
}

void NatsJetStreamSink::run() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
      if (stopping_) {
        std::vector<Delivery> stopped(job.rows->size(), Delivery{DeliveryOutcome::unavailable, "sink stopped"});
        boost::asio::post(io_, [handler = std::move(job.handler), stopped = std::move(stopped)]() mutable {
          handler(std::move(stopped));
        });
        continue;
      }
    }
    std::vector<Delivery> deliveries = publish_batch(job);
    boost::asio::post(io_, [handler = std::move(job.handler), deliveries = std::move(deliveries)]() mutable {
      handler(std::move(deliveries));
    });
  }
}

std::vector<Delivery> NatsJetStreamSink::publish_batch(const Job& job) {
  const std::vector<OutboxRow>& rows = *job.rows;
  std::vector<Delivery> deliveries(rows.size(), Delivery{DeliveryOutcome::held, {}});
  // Each aggregate's rows, in id order (rows come sorted by id).
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> chains_by_aggregate;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    chains_by_aggregate[{rows[i].aggregate_type, rows[i].aggregate_id}].push_back(i);
  }
  std::vector<std::pair<std::vector<std::size_t>, std::size_t>> chains;  // rows, next position
  chains.reserve(chains_by_aggregate.size());
  for (auto& [aggregate, indexes] : chains_by_aggregate) chains.emplace_back(std::move(indexes), 0);

  bool sink_down = false;
  while (!sink_down) {
    if (std::chrono::steady_clock::now() + config_.publish_timeout > job.deadline) break;  // the rest stay held
    std::vector<std::size_t> round;                                                        // chain indexes taking part
    for (std::size_t c = 0; c < chains.size() && round.size() < config_.max_in_flight; ++c) {
      if (chains[c].second < chains[c].first.size()) round.push_back(c);
    }
    if (round.empty()) break;
    {
      const std::lock_guard lock(nats_->board.mutex);
      nats_->board.round.clear();
      for (const std::size_t c : round) {
        nats_->board.round.emplace(message_id(rows[chains[c].first[chains[c].second]]), std::nullopt);
      }
    }
    std::vector<std::size_t> sent;  // chain indexes whose row went out
    for (const std::size_t c : round) {
      const std::size_t index = chains[c].first[chains[c].second];
      const OutboxRow& row = rows[index];
      const std::string subject = render(config_.subject, row, TemplateEscaping::none);
      const std::string body = HttpSink::body_for(row);
      const std::string id = message_id(row);
      natsMsg* msg = nullptr;
      natsStatus status = natsMsg_Create(&msg, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
      if (status == NATS_OK) status = natsMsgHeader_Set(msg, "Nats-Msg-Id", id.c_str());
      if (status == NATS_OK && !row.traceparent.empty())
        status = natsMsgHeader_Set(msg, "traceparent", row.traceparent.c_str());
      if (status == NATS_OK && !row.tracestate.empty())
        status = natsMsgHeader_Set(msg, "tracestate", row.tracestate.c_str());
      if (status == NATS_OK) status = js_PublishMsgAsync(nats_->js, &msg, nullptr);
      if (msg != nullptr) natsMsg_Destroy(msg);  // not taken by the library
      if (status == NATS_OK) {
        sent.push_back(c);
      } else if (status == NATS_MAX_PAYLOAD) {
        deliveries[index] = {DeliveryOutcome::poison,
                             "message of " + std::to_string(body.size()) + " bytes (body) on " + subject +
                                 " exceeds the server's max_payload (" +
                                 std::to_string(natsConnection_GetMaxPayload(nats_->connection)) + " bytes)"};
        chains[c].second = chains[c].first.size();  // the rest of the aggregate stays held
      } else if (status == NATS_INVALID_SUBJECT) {
        deliveries[index] = {DeliveryOutcome::poison, "invalid NATS subject \"" + subject + "\""};
        chains[c].second = chains[c].first.size();
      } else {
        deliveries[index] = {DeliveryOutcome::unavailable, "publish: " + status_text(status)};
        sink_down = true;
      }
    }
    jsPubOptions wait;
    jsPubOptions_Init(&wait);
    wait.MaxWait = config_.publish_timeout.count();
    if (js_PublishAsyncComplete(nats_->js, &wait) != NATS_OK) {
      // Acks still missing: forget those messages (a re-publish is deduplicated by Nats-Msg-Id).
      natsMsgList pending{};
      if (js_PublishAsyncGetPendingList(&pending, nats_->js) == NATS_OK) natsMsgList_Destroy(&pending);
    }
    const std::lock_guard lock(nats_->board.mutex);
    for (const std::size_t c : sent) {
      const std::size_t index = chains[c].first[chains[c].second];
      const auto& result = nats_->board.round[message_id(rows[index])];
      deliveries[index] =
          result ? *result : Delivery{DeliveryOutcome::unavailable, "no JetStream ack within publish_timeout"};
      switch (deliveries[index].outcome) {
        case DeliveryOutcome::delivered:
        case DeliveryOutcome::duplicate: ++chains[c].second; break;
        case DeliveryOutcome::unavailable: sink_down = true; [[fallthrough]];
        default: chains[c].second = chains[c].first.size(); break;
      }
    }
    nats_->board.round.clear();
  }
  return deliveries;
}

}  // namespace idem::relay
