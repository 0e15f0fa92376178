#include "relay/redis_stream_sink.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "log/log.hpp"
#include "relay/event_fingerprint.hpp"
#include "relay/message_template.hpp"

namespace idem::relay {
namespace {

constexpr std::chrono::milliseconds kMinReconnect{100};
constexpr std::chrono::milliseconds kMaxReconnect{5'000};
constexpr std::chrono::seconds kReloadScriptAfter{1};
constexpr std::size_t kNoPrevious = static_cast<std::size_t>(-1);

// KEYS[1] stream, KEYS[2] this row's marker, KEYS[3] the marker of the previous row of the same
// aggregate in this batch ("" for the first). ARGV[1] marker lifetime (s), ARGV[2] MAXLEN ("0":
// none), ARGV[3] this row's event fingerprint, ARGV[4] the previous row's ("" for the first),
// ARGV[5..] the entry's field/value pairs.
// A marker holds the fingerprint of the event it marks (event_fingerprint), not just its id: ids
// can be reused (the database restored to an earlier point, the table recreated, two databases
// sharing one Redis and prefix), and a new event with an old id must be added, not answered
// "duplicate". A marker of an earlier version holds the entry's stream id ("1700000000000-0"):
// read as this event's, as before.
// Returns 1 added, 2 duplicate (this event's marker is there: added before), 3 added although a
// marker of another event with this id was there (replaced), 0 held (the previous row did not go
// through, so this one must wait). An error from XADD (e.g. WRONGTYPE) aborts before SET.
constexpr const char* kPublishScript = R"lua(
local function marks(marker, fingerprint)
  local value = redis.call('GET', marker)
  if not value then return false end
  return value == fingerprint or string.match(value, '^%d+%-%d+$') ~= nil
end
if KEYS[3] ~= '' and not marks(KEYS[3], ARGV[4]) then
  return 0
end
local existing = redis.call('GET', KEYS[2])
if existing and (existing == ARGV[3] or string.match(existing, '^%d+%-%d+$')) then
  return 2
end
local args = {KEYS[1]}
if ARGV[2] ~= '0' then
  table.insert(args, 'MAXLEN')
  table.insert(args, '~')
  table.insert(args, ARGV[2])
end
table.insert(args, '*')
for i = 5, #ARGV do
  table.insert(args, ARGV[i])
end
redis.call('XADD', unpack(args))
redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[1])
if existing then return 3 end
return 1
)lua";

constexpr std::int64_t kScriptAdded = 1;
constexpr std::int64_t kScriptDuplicate = 2;
constexpr std::int64_t kScriptHeld = 0;
constexpr std::int64_t kScriptAddedOverAnotherEvent = 3;

// Error replies that describe the server, not the row: no attempt is counted for them.
bool is_server_condition(const redis::RedisReply& reply) {
  static constexpr std::array<std::string_view, 8> kCodes = {"OOM",      "LOADING",  "BUSY",        "MASTERDOWN",
                                                             "READONLY", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS"};
  return std::any_of(kCodes.begin(), kCodes.end(), [&](std::string_view code) { return reply.is_error_code(code); });
}

}  // namespace

struct RedisStreamSink::Batch {
  std::shared_ptr<const std::vector<OutboxRow>> rows;
  std::vector<std::string> streams;
  std::vector<std::string> markers;
  std::vector<std::string> fingerprints;  // event_fingerprint of each row
  std::vector<std::size_t> previous;      // index of the previous row of the same aggregate, or kNoPrevious
  std::vector<Delivery> deliveries;
  std::vector<std::size_t> noscript;  // rows answered NOSCRIPT, re-sent once after SCRIPT LOAD
  std::size_t outstanding = 0;
  bool resent = false;
  std::uint64_t generation = 0;
  PublishHandler handler;
};

const char* RedisStreamSink::script() { return kPublishScript; }

RedisStreamSink::RedisStreamSink(boost::asio::io_context& io, RedisSinkOptions options)
    : io_(io), options_(std::move(options)), reload_timer_(io) {}

RedisStreamSink::~RedisStreamSink() {
  if (session_) session_->stop();
}

void RedisStreamSink::start() {
  if (started_ || stopped_) return;
  started_ = true;
  redis::RedisSessionOptions options;
  options.host = options_.host;
  options.port = options_.port;
  options.password = options_.password;
  options.database = options_.database;
  options.connect_timeout = options_.connect_timeout;
  options.min_backoff = kMinReconnect;
  options.max_backoff = kMaxReconnect;
  options.component = "redis_streams_sink";
  const std::weak_ptr<RedisStreamSink> weak = weak_from_this();
  session_ = std::make_shared<redis::RedisSession>(io_, std::move(options), [weak](bool up) {
    if (const auto self = weak.lock()) self->on_session_state(up);
  });
  session_->start();
}

void RedisStreamSink::stop() {
  stopped_ = true;
  script_loaded_ = false;
  ++generation_;
  reload_timer_.cancel();
  if (session_) session_->stop();
}

void RedisStreamSink::on_session_state(bool up) {
  ++generation_;  // batches sent on the previous connection no longer count as on this one
  script_loaded_ = false;
  reload_timer_.cancel();
  if (up && !stopped_) load_script();
}

void RedisStreamSink::load_script() {
  const std::uint64_t generation = generation_;
  const std::weak_ptr<RedisStreamSink> weak = weak_from_this();
  session_->command({"SCRIPT", "LOAD", kPublishScript}, options_.command_timeout, options_.command_timeout,
                    [weak, generation](const redis::RedisError& error, const redis::RedisReply& reply) {
                      const auto self = weak.lock();
                      if (!self || generation != self->generation_) return;
                      if (error.ok() && reply.kind == redis::RedisReply::Kind::string) {
                        self->script_sha_ = reply.text;
                        self->script_loaded_ = true;
                        self->loaded_once_ = true;
                        return;
                      }
                      // A lost connection reports itself through the session (and loads again once it is back);
                      // a refusal (an ACL, OOM, BUSY) is asked again a little later on the same one.
                      if (!error.ok()) return;
                      log::warn("redis_script_load_failed", {{"reply", describe(reply)}});
                      self->reload_timer_.expires_after(kReloadScriptAfter);
                      self->reload_timer_.async_wait([weak, generation](const boost::system::error_code& wait_error) {
                        const auto self = weak.lock();
                        if (wait_error || !self || generation != self->generation_ || self->stopped_) return;
                        self->load_script();
                      });
                    });
}

void RedisStreamSink::publish(std::shared_ptr<const std::vector<OutboxRow>> rows,
                              std::chrono::steady_clock::time_point /*deadline*/, PublishHandler handler) {
  // The whole batch is pipelined at once and bounded by command_timeout, which the config keeps
  // well inside the lease: the deadline cannot be missed by more than that.
  const std::size_t count = rows->size();
  if (!ready()) {
    boost::asio::post(io_, [handler = std::move(handler), count] {
      handler(std::vector<Delivery>(count, Delivery{DeliveryOutcome::unavailable, "redis not connected"}));
    });
    return;
  }
  auto batch = std::make_shared<Batch>();
  batch->rows = std::move(rows);
  batch->handler = std::move(handler);
  batch->generation = generation_;
  batch->deliveries.assign(count, Delivery{DeliveryOutcome::unavailable, "no reply"});
  batch->streams.reserve(count);
  batch->markers.reserve(count);
  batch->previous.assign(count, kNoPrevious);
  std::map<std::pair<std::string_view, std::string_view>, std::size_t> last_of_aggregate;
  std::vector<std::size_t> all(count);
  for (std::size_t i = 0; i < count; ++i) {
    const OutboxRow& row = (*batch->rows)[i];
    batch->streams.push_back(render(options_.stream, row, TemplateEscaping::none));
    batch->markers.push_back(options_.dedup_prefix + batch->streams.back() + ":" + std::to_string(row.id));
    batch->fingerprints.push_back(event_fingerprint(row));
    const auto key = std::make_pair(std::string_view(row.aggregate_type), std::string_view(row.aggregate_id));
    if (const auto it = last_of_aggregate.find(key); it != last_of_aggregate.end()) batch->previous[i] = it->second;
    last_of_aggregate[key] = i;
    all[i] = i;
  }
  send_rows(batch, all);
}

std::vector<std::string> RedisStreamSink::row_command(const Batch& batch, std::size_t index) const {
  const OutboxRow& row = (*batch.rows)[index];
  const std::size_t previous = batch.previous[index];
  const auto window_seconds = std::chrono::duration_cast<std::chrono::seconds>(options_.dedup_window).count();
  std::vector<std::string> command{"EVALSHA",
                                   script_sha_,
                                   "3",
                                   batch.streams[index],
                                   batch.markers[index],
                                   previous == kNoPrevious ? std::string() : batch.markers[previous],
                                   std::to_string(std::max<std::int64_t>(window_seconds, 1)),
                                   std::to_string(options_.maxlen),
                                   batch.fingerprints[index],
                                   previous == kNoPrevious ? std::string() : batch.fingerprints[previous],
                                   "event_id",
                                   std::to_string(row.id),
                                   "event_type",
                                   row.event_type,
                                   "aggregate_type",
                                   row.aggregate_type,
                                   "aggregate_id",
                                   row.aggregate_id,
                                   "payload",
                                   row.payload,
                                   "headers",
                                   row.headers,
                                   "created_at",
                                   row.created_at};
  // The writer's W3C trace context, checked (Relay): consumers continue the trace from the entry.
  if (!row.traceparent.empty()) command.insert(command.end(), {"traceparent", row.traceparent});
  if (!row.tracestate.empty()) command.insert(command.end(), {"tracestate", row.tracestate});
  return command;
}

void RedisStreamSink::send_rows(const std::shared_ptr<Batch>& batch, const std::vector<std::size_t>& indexes) {
  batch->outstanding += indexes.size();
  const std::weak_ptr<RedisStreamSink> weak = weak_from_this();
  for (const std::size_t index : indexes) {
    session_->command(row_command(*batch, index), options_.command_timeout, options_.command_timeout,
                      [weak, batch, index](const redis::RedisError& error, const redis::RedisReply& reply) {
                        const auto self = weak.lock();
                        if (!self) {
                          batch->deliveries[index] = {DeliveryOutcome::unavailable, "sink stopped"};
                          if (--batch->outstanding == 0) batch->handler(std::move(batch->deliveries));
                          return;
                        }
                        self->on_row_reply(batch, index, error, reply);
                      });
  }
}

void RedisStreamSink::on_row_reply(const std::shared_ptr<Batch>& batch, std::size_t index,
                                   const redis::RedisError& error, const redis::RedisReply& reply) {
  Delivery& delivery = batch->deliveries[index];
  if (!error.ok()) {
    delivery = {DeliveryOutcome::unavailable,
                std::string(redis::redis_error_kind_name(error.kind)) + ": " + error.message};
  } else if (reply.is_error_code("NOSCRIPT")) {
    batch->noscript.push_back(index);
    delivery = {DeliveryOutcome::unavailable, reply.text};
  } else if (reply.is_error()) {
    delivery = {is_server_condition(reply) ? DeliveryOutcome::unavailable : DeliveryOutcome::retry, reply.text};
  } else if (const bool integer = reply.kind == redis::RedisReply::Kind::integer;
             integer && reply.integer == kScriptAdded) {
    delivery = {DeliveryOutcome::delivered, {}};
  } else if (integer && reply.integer == kScriptDuplicate) {
    delivery = {DeliveryOutcome::duplicate, {}};
  } else if (integer && reply.integer == kScriptAddedOverAnotherEvent) {
    // Added to the stream, its marker replaced: the outbox was restored, recreated, or shares this
    // Redis and dedup_prefix with another database.
    log::warn("event_id_reused", {{"event_id", (*batch->rows)[index].id}, {"stream", batch->streams[index]}});
    delivery = {DeliveryOutcome::delivered, {}};
  } else if (integer && reply.integer == kScriptHeld) {
    delivery = {DeliveryOutcome::held, "an earlier row of the aggregate did not go through"};
  } else {
    delivery = {DeliveryOutcome::retry, "unexpected script reply: " + describe(reply)};
  }
  if (--batch->outstanding == 0) finish_sends(batch);
}

void RedisStreamSink::finish_sends(const std::shared_ptr<Batch>& batch) {
  const bool same_connection = batch->generation == generation_ && ready();
  if (!batch->noscript.empty() && !batch->resent && same_connection) {
    batch->resent = true;
    std::vector<std::size_t> again = std::move(batch->noscript);
    batch->noscript.clear();
    std::sort(again.begin(), again.end());
    log::warn("redis_script_missing", {{"rows", again.size()}});
    const std::weak_ptr<RedisStreamSink> weak = weak_from_this();
    batch->outstanding = 1;  // the SCRIPT LOAD; send_rows adds the rows
    session_->command(
        {"SCRIPT", "LOAD", kPublishScript}, options_.command_timeout, options_.command_timeout,
        [weak, batch, again = std::move(again)](const redis::RedisError& error, const redis::RedisReply& reply) {
          const auto self = weak.lock();
          --batch->outstanding;
          if (!self || !error.ok() || reply.kind != redis::RedisReply::Kind::string ||
              batch->generation != self->generation_ || !self->ready()) {
            // The rows stay `unavailable` (NOSCRIPT): published on a later claim.
            batch->handler(std::move(batch->deliveries));
            return;
          }
          self->script_sha_ = reply.text;
          self->send_rows(batch, again);
        });
    return;
  }
  const bool any_written = std::any_of(batch->deliveries.begin(), batch->deliveries.end(), [](const Delivery& d) {
    return d.outcome == DeliveryOutcome::delivered || d.outcome == DeliveryOutcome::duplicate;
  });
  if (options_.wait_replicas > 0 && any_written && same_connection) {
    wait_for_replicas(batch);
    return;
  }
  batch->handler(std::move(batch->deliveries));
}

void RedisStreamSink::wait_for_replicas(const std::shared_ptr<Batch>& batch) {
  const unsigned wanted = options_.wait_replicas;
  const std::chrono::milliseconds wait_deadline = options_.wait_timeout + options_.command_timeout;
  session_->command(
      {"WAIT", std::to_string(wanted), std::to_string(options_.wait_timeout.count())}, wait_deadline, wait_deadline,
      [batch, wanted](const redis::RedisError& error, const redis::RedisReply& reply) {
        const bool enough = error.ok() && reply.kind == redis::RedisReply::Kind::integer &&
                            reply.integer >= static_cast<std::int64_t>(wanted);
        if (!enough) {
          const std::string why =
              error.ok() ? "WAIT: " + describe(reply) + " of " + std::to_string(wanted) + " replicas acknowledged"
                         : "WAIT: " + error.message;
          // Not durable enough: publish again later (the markers make it free).
          for (Delivery& delivery : batch->deliveries) {
            if (delivery.outcome == DeliveryOutcome::delivered || delivery.outcome == DeliveryOutcome::duplicate) {
              delivery = {DeliveryOutcome::unavailable, why};
            }
          }
        }
        batch->handler(std::move(batch->deliveries));
      });
}

}  // namespace idem::relay
