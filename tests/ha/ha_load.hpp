#pragma once
// The traffic the HA tests run through a failover: client threads sending logical requests through
// idemproxy (each with its own key, retried until a final answer), and a writer filling the outbox
// the relay drains, each row remembered once its INSERT was acknowledged. Blocking I/O: test
// threads only.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "support/http_client.hpp"

namespace idem::test::ha {

using Clock = std::chrono::steady_clock;

// One logical request: one key, as many attempts as it took to get a final answer.
struct LogicalRequest {
  std::string key;
  int attempts = 0;
  int refusals = 0;          // 503 store-unavailable answers
  int in_flight = 0;         // 409 request-in-flight answers (retried too)
  int transport_errors = 0;  // no complete HTTP answer (connection refused or reset, timeout)
  int wrong = 0;             // an answer that is none of the above and not final either
  std::string wrong_answer;  // the first of them, for the message
  bool settled = false;      // a final answer came within the bound
  HttpResponse final_response;
  Clock::time_point final_sent_at{};
  Clock::time_point answered_at{};
  std::vector<Clock::time_point> refused_at;
};

// Threads each sending POST <path> with fresh keys, retrying 503 store-unavailable and 409
// request-in-flight every `retry_pause`, for at most `per_request` per logical request.
class RequestLoad {
 public:
  RequestLoad(std::uint16_t port, std::string path, std::string label, int threads,
              std::chrono::milliseconds per_request = std::chrono::seconds(25));
  ~RequestLoad();
  RequestLoad(const RequestLoad&) = delete;
  RequestLoad& operator=(const RequestLoad&) = delete;

  // Final 2xx answers to attempts sent after `since` (for "first success after the kill").
  bool answered_since(Clock::time_point since, Clock::time_point* first = nullptr);
  // Stops issuing new logical requests; each thread finishes the one it is on. Everything sent.
  std::vector<LogicalRequest> stop();

 private:
  void run(int thread);

  std::uint16_t port_;
  std::string path_;
  std::string label_;
  std::chrono::milliseconds per_request_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<LogicalRequest> done_;
  std::vector<std::thread> threads_;
};

// One outbox event as the writer numbered it: the n-th of its aggregate.
struct OutboxEvent {
  std::string aggregate_id;
  int n = 0;
  bool operator<(const OutboxEvent& other) const {
    return std::tie(aggregate_id, n) < std::tie(other.aggregate_id, other.n);
  }
};

// Inserts one outbox row per transaction, round robin over `aggregates` aggregates of type
// "order", payload {"n": N}. A failed INSERT is retried on a new connection (target_session_attrs
// finds the new primary) after checking whether it committed after all.
class OutboxWriter {
 public:
  OutboxWriter(std::string dsn, std::string label, int aggregates, std::chrono::milliseconds pause);
  ~OutboxWriter();
  OutboxWriter(const OutboxWriter&) = delete;
  OutboxWriter& operator=(const OutboxWriter&) = delete;

  std::size_t acknowledged_count();
  // Stops after the row in hand; the acknowledged rows, and how many INSERTs failed and were retried.
  std::vector<OutboxEvent> stop(int* retries = nullptr);

 private:
  void run();

  std::string dsn_;
  std::string label_;
  int aggregates_;
  std::chrono::milliseconds pause_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<OutboxEvent> acknowledged_;
  int retries_ = 0;
  std::thread thread_;
};

}  // namespace idem::test::ha
