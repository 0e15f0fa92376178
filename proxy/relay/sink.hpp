#pragma once
// Where claimed rows go. A sink publishes one batch at a time per call (several calls may overlap)
// and reports one Delivery per row. It keeps the order of each aggregate's rows within the batch:
// a row is sent only after its aggregate's previous row in the batch was acknowledged (or, for
// pipelined sinks, is refused by the server unless that row was), so a failure holds back only
// the rest of its own aggregate.
//
// Threading: used on the io thread only; handlers run exactly once, posted.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "relay/outbox_row.hpp"

namespace idem::relay {

enum class DeliveryOutcome {
  delivered,    // acknowledged by the sink (first time)
  duplicate,    // the sink already had it (a re-publish inside the dedup window): as good as delivered
  retry,        // this row failed; try it again later (counts an attempt)
  poison,       // the sink refused this row for good (HTTP 4xx): park it now
  held,         // not attempted: an earlier row of its aggregate in this batch did not go through
  unavailable,  // the sink could not be reached; outcome unknown or not attempted (no attempt counted)
};

struct Delivery {
  DeliveryOutcome outcome = DeliveryOutcome::unavailable;
  std::string error;  // retry, poison, unavailable: what happened
};

using PublishHandler = std::function<void(std::vector<Delivery>)>;

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void start() = 0;  // begins connecting; reconnects on its own
  virtual void stop() = 0;   // closes connections; later publishes report `unavailable`
  virtual bool ready() const = 0;
  // Still making its first connection since start(), none failed yet: the relay waits for it
  // rather than backing off (a slow start is not an outage).
  virtual bool connecting() const { return false; }
  virtual std::string_view name() const = 0;
  // `rows` sorted by id. The handler gets exactly rows->size() deliveries, in the same order.
  // No row is started when it could not finish (the sink's own timeout) before `deadline`: the
  // batch's lease must still hold when it is settled. Such rows are reported `held`.
  virtual void publish(std::shared_ptr<const std::vector<OutboxRow>> rows,
                       std::chrono::steady_clock::time_point deadline, PublishHandler handler) = 0;
};

}  // namespace idem::relay
