#include "ha/ha_load.hpp"

#include <memory>
#include <optional>
#include <stdexcept>

#include "failure/failure_requests.hpp"
#include "relay/relay_env.hpp"
#include "support/blocking_pg.hpp"
#include "support/proxy_fixture.hpp"

namespace idem::test::ha {

namespace {

using namespace std::chrono_literals;

constexpr auto kRetryPause = 100ms;
constexpr auto kAttemptTimeout = 10s;
// Between two logical requests of one thread: bounds the count (a few hundred per run).
constexpr auto kRequestPause = 30ms;

}  // namespace

RequestLoad::RequestLoad(std::uint16_t port, std::string path, std::string label, int threads,
                         std::chrono::milliseconds per_request)
    : port_(port), path_(std::move(path)), label_(std::move(label)), per_request_(per_request) {
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { run(t); });
}

RequestLoad::~RequestLoad() { stop(); }

void RequestLoad::run(int thread) {
  while (!stop_.load()) {
    LogicalRequest request;
    request.key = unique_key(label_ + "-" + std::to_string(thread));
    const auto deadline = Clock::now() + per_request_;
    while (Clock::now() < deadline) {
      ++request.attempts;
      const auto sent_at = Clock::now();
      // The delay widens the window in which a request is claimed but not yet completed.
      HttpResponse response = send(port_, failure::keyed_post(path_, request.key).with("X-Test-Delay-Ms", "20"),
                                   kAttemptTimeout);
      const std::string slug = failure::problem_slug(response);
      if (!response.ok()) {
        ++request.transport_errors;
      } else if (response.status == 503 && slug == "store-unavailable") {
        ++request.refusals;
        request.refused_at.push_back(Clock::now());
      } else if (response.status == 409 && slug == "request-in-flight") {
        ++request.in_flight;
      } else if (response.status == 200 || (response.status == 502 && slug == "outcome-unknown")) {
        // outcome-unknown: a lock route's answer once the owner's lease ran out without a stored
        // completion (its completion write did not reach the store): final, never re-executed.
        request.settled = true;
        request.final_response = std::move(response);
        request.final_sent_at = sent_at;
        request.answered_at = Clock::now();
        break;
      } else {
        ++request.wrong;
        if (request.wrong_answer.empty()) request.wrong_answer = describe(response, 300);
      }
      std::this_thread::sleep_for(kRetryPause);
    }
    {
      std::lock_guard lock(mutex_);
      done_.push_back(std::move(request));
    }
    std::this_thread::sleep_for(kRequestPause);
  }
}

bool RequestLoad::answered_since(Clock::time_point since, Clock::time_point* first) {
  std::lock_guard lock(mutex_);
  bool found = false;
  for (const LogicalRequest& request : done_) {
    if (!request.settled || request.final_response.status != 200 || request.final_sent_at < since) continue;
    if (first != nullptr && (!found || request.answered_at < *first)) *first = request.answered_at;
    found = true;
  }
  return found;
}

std::vector<LogicalRequest> RequestLoad::stop() {
  stop_.store(true);
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  std::lock_guard lock(mutex_);
  return done_;
}

OutboxWriter::OutboxWriter(std::string dsn, std::string label, int aggregates, std::chrono::milliseconds pause)
    : dsn_(std::move(dsn)), label_(std::move(label)), aggregates_(aggregates), pause_(pause), thread_([this] { run(); }) {}

OutboxWriter::~OutboxWriter() { stop(); }

void OutboxWriter::run() {
  std::unique_ptr<BlockingPg> client;
  std::vector<int> next(static_cast<std::size_t>(aggregates_), 1);
  bool in_doubt = false;  // the last INSERT failed: it may have committed all the same
  for (int turn = 0; !stop_.load();) {
    const OutboxEvent event{label_ + "-" + std::to_string(turn % aggregates_), next[static_cast<std::size_t>(turn % aggregates_)]};
    const std::vector<std::string> params{event.aggregate_id, std::to_string(event.n)};
    try {
      if (!client) client = std::make_unique<BlockingPg>(dsn_);
      bool committed = false;
      if (in_doubt) {
        committed = client->scalar_int("SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND (payload->>'n')::int = $2",
                                   params) > 0;
        in_doubt = false;
      }
      if (!committed) {
        client->query("INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, headers) "
                      "VALUES ('order', $1, 'happened', jsonb_build_object('n', $2::int), '{}'::jsonb)",
                      params);
      }
      {
        std::lock_guard lock(mutex_);
        acknowledged_.push_back(event);
      }
      ++next[static_cast<std::size_t>(turn % aggregates_)];
      ++turn;
    } catch (const std::exception&) {
      // The primary went away (or this is the old one, read-only now): a new connection, same row.
      client.reset();
      in_doubt = true;
      std::lock_guard lock(mutex_);
      ++retries_;
    }
    std::this_thread::sleep_for(pause_);
  }
}

std::size_t OutboxWriter::acknowledged_count() {
  std::lock_guard lock(mutex_);
  return acknowledged_.size();
}

std::vector<OutboxEvent> OutboxWriter::stop(int* retries) {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  if (retries != nullptr) *retries = retries_;
  return acknowledged_;
}

}  // namespace idem::test::ha
