#include "relay/nats_jetstream_sink.hpp"

#include <boost/asio/post.hpp>

#include <nats/nats.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "log/log.hpp"
#include "relay/http_sink.hpp"
#include "relay/message_template.hpp"
#include "relay/nats_duplicate_window.hpp"
#include "relay/nats_message_id.hpp"
#include "relay/nats_subjects.hpp"

namespace idem::relay {
namespace {

constexpr int kReconnectWaitMs = 200;
// A subject the filters do not cover re-reads them at most this often (an operator adding it to
// the stream is seen within this long; a row failing on it does not query the server each batch).
constexpr std::chrono::seconds kFiltersRereadAfter{1};
// A sequence no stream reaches: a probe carrying it as Nats-Expected-Last-Sequence is refused
// (JSStreamWrongLastSequenceErr) unless its Nats-Msg-Id is a duplicate, which is checked first.
constexpr const char* kUnreachableSequence = "18446744073709551615";

std::string status_text(natsStatus status) {
  const char* last = nats_GetLastError(nullptr);
  return std::string(natsStatus_GetText(status)) + (last != nullptr && *last != '\0' ? std::string(": ") + last : "");
}

std::int64_t unix_micros_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What came back for one message, copied on libnats's ack thread.
struct AckResult {
  bool acked = false;
  bool duplicate = false;
  std::uint64_t sequence = 0;  // of the stored message (the earlier one when duplicate)
  natsStatus error = NATS_OK;
  jsErrCode code = static_cast<jsErrCode>(0);
  std::string text;
};

// The acks of the wave in progress, filled in on libnats's ack thread.
struct AckBoard {
  std::mutex mutex;
  std::unordered_map<std::string, std::optional<AckResult>> wave;  // Nats-Msg-Id -> result once acked
};

void on_ack(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void* closure) {
  auto* board = static_cast<AckBoard*>(closure);
  const char* id = nullptr;
  if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr) {
    AckResult result;
    if (ack != nullptr) {
      result.acked = true;
      result.duplicate = ack->Duplicate;
      result.sequence = ack->Sequence;
    } else if (error != nullptr) {
      result.error = error->Err;
      result.code = error->ErrCode;
      result.text = error->ErrText != nullptr ? error->ErrText : "";
    }
    const std::lock_guard lock(board->mutex);
    if (const auto it = board->wave.find(id); it != board->wave.end()) it->second = std::move(result);
  }
  natsMsg_Destroy(msg);
}

// A publish's outcome. No responders on a subject the filters cover: the stream has no leader or
// was just edited; `filters_stale` asks for them to be read again.
Delivery outcome_of(const std::optional<AckResult>& result, const std::string& subject, bool& filters_stale) {
  if (!result) return {DeliveryOutcome::unavailable, "no JetStream ack within publish_timeout"};
  if (result->acked) return {result->duplicate ? DeliveryOutcome::duplicate : DeliveryOutcome::delivered, {}};
  if (result->error == NATS_NO_RESPONDERS) {
    filters_stale = true;
    return {DeliveryOutcome::unavailable, "JetStream: no responders on " + subject};
  }
  if (result->error == NATS_TIMEOUT || result->error == NATS_CONNECTION_CLOSED) {
    return {DeliveryOutcome::unavailable, std::string("JetStream: ") + natsStatus_GetText(result->error)};
  }
  return {DeliveryOutcome::retry,
          "JetStream refused the message: " + (result->text.empty() ? std::string("no reason given") : result->text)};
}

struct StreamFacts {
  std::chrono::milliseconds window{0};
  std::vector<std::string> filters;
  std::int64_t last_stored_micros = 0;  // when its last message was stored; 0 when it holds none
};

// nullopt with `error` when the stream cannot be read.
std::optional<StreamFacts> read_stream(jsCtx* js, const std::string& stream, std::chrono::milliseconds wait,
                                       std::string& error) {
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = wait.count();
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus status = js_GetStreamInfo(&info, js, stream.c_str(), &options, &code);
  if (status != NATS_OK || info == nullptr) {
    error = "stream \"" + stream + "\": " + status_text(status);
    if (info != nullptr) jsStreamInfo_Destroy(info);
    return std::nullopt;
  }
  StreamFacts facts;
  if (info->Config != nullptr) {
    facts.window =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(info->Config->Duplicates));
    for (int i = 0; i < info->Config->SubjectsLen; ++i) facts.filters.emplace_back(info->Config->Subjects[i]);
  }
  if (info->State.Msgs > 0) facts.last_stored_micros = info->State.LastTime / 1000;  // ns since the epoch
  if (facts.filters.empty()) facts.filters.push_back(stream);  // a stream made without subjects takes its name
  jsStreamInfo_Destroy(info);
  return facts;
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

  // Throws std::runtime_error("sink.nats_jetstream: ...").
  void connect(const NatsSinkOptions& sink, bool reconnect) {
    const auto fail = [](const std::string& what, natsStatus status) {
      throw std::runtime_error("sink.nats_jetstream: " + what + ": " + status_text(status));
    };
    natsStatus status = natsOptions_Create(&options);
    if (status == NATS_OK) status = natsOptions_SetURL(options, sink.url.c_str());
    if (status == NATS_OK) status = natsOptions_SetTimeout(options, sink.connect_timeout.count());
    if (status == NATS_OK) status = natsOptions_SetAllowReconnect(options, reconnect);
    if (status == NATS_OK) status = natsOptions_SetMaxReconnect(options, -1);  // forever
    if (status == NATS_OK) status = natsOptions_SetReconnectWait(options, kReconnectWaitMs);
    if (status != NATS_OK) fail("options", status);
    status = natsConnection_Connect(&connection, options);
    if (status != NATS_OK) fail("connect to " + sink.url, status);
    jsOptions js_options;
    jsOptions_Init(&js_options);
    js_options.PublishAsync.AckHandler = on_ack;
    js_options.PublishAsync.AckHandlerClosure = &board;
    js_options.PublishAsync.MaxPending = static_cast<int64_t>(sink.max_in_flight);
    status = natsConnection_JetStream(&js, connection, &js_options);
    if (status != NATS_OK) fail("JetStream context", status);
  }
};

// One row of a wave, and whether it goes as a probe under its earlier version's id
// (nats_message_id.hpp).
struct NatsJetStreamSink::Outgoing {
  std::size_t index = 0;
  bool probe = false;
};

NatsJetStreamSink::NatsJetStreamSink(boost::asio::io_context& io, NatsSinkOptions options,
                                     std::chrono::milliseconds required_window, RelayStats& stats)
    : io_(io), options_(std::move(options)), stats_(stats), nats_(std::make_unique<Nats>()) {
  nats_->connect(options_, /*reconnect=*/true);
  std::string error;
  const std::optional<StreamFacts> facts = read_stream(nats_->js, options_.stream, options_.connect_timeout, error);
  if (!facts) throw std::runtime_error("sink.nats_jetstream: " + error);
  const DuplicateWindowCheck check = check_duplicate_window(options_.stream, facts->window, required_window);
  if (check.verdict == DuplicateWindowVerdict::refused)
    throw std::runtime_error("sink.nats_jetstream: " + check.message);
  window_ = facts->window;
  filters_ = facts->filters;
  filters_read_at_ = std::chrono::steady_clock::now();
  started_micros_ = unix_micros_now();
  probe_earlier_copies_ = earlier_copies_possible(facts->last_stored_micros, started_micros_, window_);
  log::info("nats_connected", {{"url", options_.url},
                               {"stream", options_.stream},
                               {"subjects", describe_filters(filters_)},
                               {"duplicate_window_ms", static_cast<std::int64_t>(window_.count())},
                               {"probe_earlier_copies", probe_earlier_copies_ ? "yes" : "no"}});
  if (check.verdict == DuplicateWindowVerdict::warned) {
    log::warn("nats_duplicate_window_short", {{"stream", options_.stream},
                                              {"duplicate_window_ms", static_cast<std::int64_t>(window_.count())},
                                              {"warning", check.message}});
  }
}

NatsJetStreamSink::~NatsJetStreamSink() {
  stop();
  if (thread_.joinable()) thread_.join();
}

std::string NatsJetStreamSink::check_report(const NatsSinkOptions& sink, std::chrono::milliseconds required_window) {
  Nats nats;
  try {
    nats.connect(sink, /*reconnect=*/false);
  } catch (const std::exception& error) {
    return std::string("nats: not checked: ") + error.what();
  }
  std::string error;
  const std::optional<StreamFacts> facts = read_stream(nats.js, sink.stream, sink.connect_timeout, error);
  if (!facts) return "nats: not checked: " + error;
  const DuplicateWindowCheck check = check_duplicate_window(sink.stream, facts->window, required_window);
  switch (check.verdict) {
    case DuplicateWindowVerdict::refused: return "nats: error: " + check.message + " (the relay refuses to start)";
    case DuplicateWindowVerdict::warned: return "nats: warning: " + check.message;
    case DuplicateWindowVerdict::enough: break;
  }
  return "nats: " + check.message + "; subjects " + describe_filters(facts->filters);
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

bool NatsJetStreamSink::refresh_filters(std::string& error) {
  const std::optional<StreamFacts> facts = read_stream(nats_->js, options_.stream, options_.publish_timeout, error);
  if (!facts) return false;
  if (facts->filters != filters_) {
    log::info("nats_stream_subjects", {{"stream", options_.stream}, {"subjects", describe_filters(facts->filters)}});
  }
  filters_ = facts->filters;
  filters_read_at_ = std::chrono::steady_clock::now();
  filters_stale_ = false;
  return true;
}

std::vector<Delivery> NatsJetStreamSink::publish_batch(const Job& job) {
  const std::vector<OutboxRow>& rows = *job.rows;
  std::vector<Delivery> deliveries(rows.size(), Delivery{DeliveryOutcome::held, {}});
  std::vector<std::string> subjects;
  subjects.reserve(rows.size());
  bool any_uncovered = false;
  for (const OutboxRow& row : rows) {
    subjects.push_back(render(options_.subject, row, TemplateEscaping::none));
    any_uncovered = any_uncovered || !stream_covers(filters_, subjects.back());
  }
  const auto now = std::chrono::steady_clock::now();
  if (filters_stale_ || (any_uncovered && now - filters_read_at_ >= kFiltersRereadAfter)) {
    std::string error;
    if (!refresh_filters(error)) {
      return std::vector<Delivery>(rows.size(), Delivery{DeliveryOutcome::unavailable, error});
    }
  }
  // Each aggregate's rows, in id order (rows come sorted by id).
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> chains_by_aggregate;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    chains_by_aggregate[{rows[i].aggregate_type, rows[i].aggregate_id}].push_back(i);
  }
  std::vector<std::pair<std::vector<std::size_t>, std::size_t>> chains;  // rows, next position
  chains.reserve(chains_by_aggregate.size());
  for (auto& [aggregate, indexes] : chains_by_aggregate) chains.emplace_back(std::move(indexes), 0);
  const auto any_unavailable = [&deliveries] {
    return std::any_of(deliveries.begin(), deliveries.end(),
                       [](const Delivery& d) { return d.outcome == DeliveryOutcome::unavailable; });
  };

  // Probes first, for every row that may have a copy under its bare id: a probe never stores
  // anything, so it need not wait for its aggregate's previous row, and the whole batch's probes
  // cost one round trip per max_in_flight rows. A copy found settles its row as `duplicate`; no copy
  // leaves it `held` for the rounds below.
  std::vector<Outgoing> probes;
  const std::int64_t now_micros = unix_micros_now();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (probe_earlier_copies_ && stream_covers(filters_, subjects[i]) &&
        may_have_legacy_copy(rows[i].created_at_micros, started_micros_, now_micros, window_)) {
      probes.push_back({i, true});
    }
  }
  for (std::size_t from = 0; from < probes.size(); from += options_.max_in_flight) {
    if (std::chrono::steady_clock::now() + options_.publish_timeout > job.deadline) return deliveries;  // all held
    const auto to =
        probes.begin() + static_cast<std::ptrdiff_t>(std::min(probes.size(), from + options_.max_in_flight));
    send_wave(rows, subjects, std::vector<Outgoing>(probes.begin() + static_cast<std::ptrdiff_t>(from), to),
              deliveries);
    if (any_unavailable()) return deliveries;  // nothing published yet: the relay backs off
  }

  bool sink_down = false;
  while (!sink_down) {
    std::vector<Outgoing> wave;  // the next row of each aggregate still going
    for (auto& [indexes, next] : chains) {
      if (wave.size() >= options_.max_in_flight) break;
      // Rows whose probe found their earlier copy are through already.
      while (next < indexes.size() && deliveries[indexes[next]].outcome == DeliveryOutcome::duplicate) ++next;
      if (next >= indexes.size()) continue;
      const std::size_t index = indexes[next];
      if (deliveries[index].outcome != DeliveryOutcome::held) {  // its probe was refused
        next = indexes.size();
        continue;
      }
      if (!stream_covers(filters_, subjects[index])) {
        deliveries[index] = {DeliveryOutcome::retry,
                             "subject \"" + subjects[index] + "\" is not covered by stream \"" + options_.stream +
                                 "\" (subjects: " + describe_filters(filters_) + "): not published"};
        stats_.nats_subject_not_in_stream.fetch_add(1, std::memory_order_relaxed);
        next = indexes.size();  // the rest of the aggregate stays held
        continue;
      }
      wave.push_back({index, false});
    }
    if (wave.empty()) break;
    if (std::chrono::steady_clock::now() + options_.publish_timeout > job.deadline) break;  // the rest stay held
    send_wave(rows, subjects, wave, deliveries);
    // Advance each chain whose row went through; stop it (the rest held) when its row did not.
    for (auto& [indexes, next] : chains) {
      if (next >= indexes.size()) continue;
      switch (deliveries[indexes[next]].outcome) {
        case DeliveryOutcome::delivered:
        case DeliveryOutcome::duplicate: ++next; break;
        case DeliveryOutcome::held: break;  // not in this round (beyond max_in_flight)
        case DeliveryOutcome::unavailable: sink_down = true; [[fallthrough]];
        case DeliveryOutcome::retry:
        case DeliveryOutcome::poison: next = indexes.size(); break;
      }
    }
  }
  // Behind a row that did not go through, every later row of its aggregate is `held`, whatever its
  // probe found: the relay settles an aggregate in order.
  for (const auto& [indexes, next] : chains) {
    bool stopped = false;
    for (const std::size_t index : indexes) {
      if (stopped) {
        deliveries[index] = {DeliveryOutcome::held, {}};
      } else {
        stopped = deliveries[index].outcome != DeliveryOutcome::delivered &&
                  deliveries[index].outcome != DeliveryOutcome::duplicate;
      }
    }
  }
  return deliveries;
}

void NatsJetStreamSink::send_wave(const std::vector<OutboxRow>& rows, const std::vector<std::string>& subjects,
                                  const std::vector<Outgoing>& wave, std::vector<Delivery>& deliveries) {
  std::vector<std::string> ids;
  ids.reserve(wave.size());
  for (const Outgoing& out : wave) {
    ids.push_back(out.probe ? legacy_nats_message_id(rows[out.index]) : nats_message_id(rows[out.index]));
  }
  {
    const std::lock_guard lock(nats_->board.mutex);
    nats_->board.wave.clear();
    for (const std::string& id : ids) nats_->board.wave.emplace(id, std::nullopt);
  }
  std::vector<std::string> bodies(wave.size());
  std::vector<bool> sent(wave.size(), false);
  bool sink_down = false;
  for (std::size_t w = 0; w < wave.size() && !sink_down; ++w) {
    const OutboxRow& row = rows[wave[w].index];
    const std::string& subject = subjects[wave[w].index];
    bodies[w] = HttpSink::body_for(row);
    const std::string& body = bodies[w];
    natsMsg* msg = nullptr;
    natsStatus status = natsMsg_Create(&msg, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
    if (status == NATS_OK) status = natsMsgHeader_Set(msg, "Nats-Msg-Id", ids[w].c_str());
    // A probe is the full message: were it stored after all, it is a correct copy of the event.
    if (status == NATS_OK && wave[w].probe)
      status = natsMsgHeader_Set(msg, "Nats-Expected-Last-Sequence", kUnreachableSequence);
    if (status == NATS_OK && !row.traceparent.empty())
      status = natsMsgHeader_Set(msg, "traceparent", row.traceparent.c_str());
    if (status == NATS_OK && !row.tracestate.empty())
      status = natsMsgHeader_Set(msg, "tracestate", row.tracestate.c_str());
    if (status == NATS_OK) status = js_PublishMsgAsync(nats_->js, &msg, nullptr);
    if (msg != nullptr) natsMsg_Destroy(msg);  // not taken by the library
    if (status == NATS_OK) {
      sent[w] = true;
    } else if (status == NATS_MAX_PAYLOAD) {
      deliveries[wave[w].index] = {DeliveryOutcome::poison,
                                   "message of " + std::to_string(body.size()) + " bytes (body) on " + subject +
                                       " exceeds the server's max_payload (" +
                                       std::to_string(natsConnection_GetMaxPayload(nats_->connection)) + " bytes)"};
    } else if (status == NATS_INVALID_SUBJECT) {
      deliveries[wave[w].index] = {DeliveryOutcome::poison, "invalid NATS subject \"" + subject + "\""};
    } else {
      deliveries[wave[w].index] = {DeliveryOutcome::unavailable, "publish: " + status_text(status)};
      sink_down = true;
    }
  }
  jsPubOptions wait;
  jsPubOptions_Init(&wait);
  wait.MaxWait = options_.publish_timeout.count();
  if (js_PublishAsyncComplete(nats_->js, &wait) != NATS_OK) {
    // Acks still missing: forget those messages (a re-publish is deduplicated by Nats-Msg-Id).
    natsMsgList pending{};
    if (js_PublishAsyncGetPendingList(&pending, nats_->js) == NATS_OK) natsMsgList_Destroy(&pending);
  }
  std::vector<std::optional<AckResult>> results(wave.size());
  {
    const std::lock_guard lock(nats_->board.mutex);
    for (std::size_t w = 0; w < wave.size(); ++w) {
      if (sent[w]) results[w] = nats_->board.wave[ids[w]];
    }
    nats_->board.wave.clear();
  }
  for (std::size_t w = 0; w < wave.size(); ++w) {
    if (!sent[w]) continue;
    const std::size_t index = wave[w].index;
    const std::optional<AckResult>& result = results[w];
    if (!wave[w].probe) {
      deliveries[index] = outcome_of(result, subjects[index], filters_stale_);
      continue;
    }
    // A probe refused: no copy under the bare id, the row stays `held` and goes out in its round.
    if (result && !result->acked && result->code == JSStreamWrongLastSequenceErr) continue;
    // Stored (a server that ignored the expectation: a correct copy of the event), or failed.
    if (!result || !result->acked || !result->duplicate) {
      deliveries[index] = outcome_of(result, subjects[index], filters_stale_);
      continue;
    }
    // "Duplicate": read the copy back; this row's very message, or another event's with its id.
    jsOptions options;
    jsOptions_Init(&options);
    options.Wait = options_.publish_timeout.count();
    natsMsg* stored = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus status = js_GetMsg(&stored, nats_->js, options_.stream.c_str(), result->sequence, &options, &code);
    if (status != NATS_OK) {
      deliveries[index] = {
          DeliveryOutcome::unavailable,
          "reading back stream message " + std::to_string(result->sequence) + ": " + status_text(status)};
    } else if (std::string_view(natsMsg_GetData(stored), static_cast<std::size_t>(natsMsg_GetDataLength(stored))) ==
               bodies[w]) {
      log::info("nats_earlier_copy_found",
                {{"event_id", rows[index].id}, {"sequence", static_cast<std::int64_t>(result->sequence)}});
      deliveries[index] = {DeliveryOutcome::duplicate, {}};
    } else {
      // Another event under the same bare id (another database, a reused id): stays `held`.
      log::warn("event_id_reused", {{"event_id", rows[index].id}, {"stream", options_.stream}});
    }
    natsMsg_Destroy(stored);
  }
}

}  // namespace idem::relay
