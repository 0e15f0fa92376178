#include "storm.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <memory>
#include <optional>

namespace idem::bench {
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::uint64_t kMaxResponseBody = 1 << 20;
constexpr std::chrono::seconds kGiveUpGrace{1};

struct StormSlot {
  explicit StormSlot(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  beast::flat_buffer buffer;
  std::optional<Response> response;
  std::optional<ErrorKind> error;
  std::chrono::nanoseconds latency{0};
};

// One round's shared state; io first, so it is destroyed last.
struct Round {
  asio::io_context io{1};
  asio::steady_timer go{io, Clock::time_point::max()};       // cancelled: every connection is up
  asio::steady_timer deadline{io, Clock::time_point::max()};  // fires: close everything
  std::vector<std::unique_ptr<StormSlot>> slots;
  std::string request_bytes;
  unsigned to_connect = 0;
  unsigned to_finish = 0;
  bool released = false;
  bool expired = false;

  void release() {
    released = true;
    go.cancel();
  }
  void finished_one() {
    if (--to_finish == 0) deadline.cancel();
  }
};

asio::awaitable<void> duplicate(Round& round, StormSlot& slot, tcp::endpoint endpoint) {
  auto [connect_ec] = co_await slot.socket.async_connect(endpoint, use_tuple);
  if (connect_ec) {
    slot.error = round.expired ? ErrorKind::timeout : ErrorKind::connect_failed;
    if (--round.to_connect == 0) round.release();
    round.finished_one();
    co_return;
  }
  boost::system::error_code ignored;
  slot.socket.set_option(tcp::no_delay(true), ignored);
  if (--round.to_connect == 0) {
    round.release();
  } else if (!round.released) {
    co_await round.go.async_wait(use_tuple);
  }

  const auto sent = Clock::now();
  auto [write_ec, written] = co_await asio::async_write(slot.socket, asio::buffer(round.request_bytes), use_tuple);
  if (write_ec) {
    slot.error = round.expired ? ErrorKind::timeout : ErrorKind::write_failed;
    round.finished_one();
    co_return;
  }
  beast::http::response_parser<beast::http::string_body> parser;
  parser.body_limit(kMaxResponseBody);
  auto [read_ec, read] = co_await beast::http::async_read(slot.socket, slot.buffer, parser, use_tuple);
  if (read_ec) {
    slot.error = round.expired ? ErrorKind::timeout : ErrorKind::read_failed;
  } else {
    slot.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent);
    slot.response = parser.release();
  }
  slot.socket.close(ignored);
  round.finished_one();
}

// Bounds the round: connections and requests still open at the deadline are closed.
asio::awaitable<void> round_deadline(Round& round, std::chrono::nanoseconds limit) {
  round.deadline.expires_after(limit);
  auto [ec] = co_await round.deadline.async_wait(use_tuple);
  if (ec) co_return;  // cancelled: every duplicate finished
  round.expired = true;
  round.release();
  for (auto& slot : round.slots) {
    boost::system::error_code ignored;
    slot->socket.close(ignored);
  }
}

// Tallies one finished round into `stats` and returns its outcome.
StormRoundResult judge(const Round& round, const StormSpec& spec, PhaseStats& stats) {
  StormRoundResult outcome;
  const std::string* reference_body = nullptr;  // the executed 200's body, else the first 200's
  for (const auto& slot : round.slots) {
    if (slot->response && slot->response->result_int() == 200 && !is_replay(*slot->response)) {
      reference_body = &slot->response->body();
      break;
    }
  }
  for (const auto& slot : round.slots) {
    if (slot->error) {
      stats.errors.add(*slot->error);
      continue;
    }
    if (!slot->response) continue;  // cannot happen: a slot ends with a response or an error
    const Response& response = *slot->response;
    ++stats.responses;
    stats.count_status(response.result_int());
    std::optional<ErrorKind> problem;
    if (response.result_int() == 200) {
      if (reference_body == nullptr) reference_body = &response.body();
      if (is_replay(response)) {
        ++outcome.replayed;
        if (response.body() != *reference_body) problem = ErrorKind::storm_replay_mismatch;
      } else {
        ++outcome.executed;
        if (response.body() != spec.executed_body) problem = ErrorKind::body_mismatch;
      }
    } else if (response.result_int() == 409) {
      ++outcome.conflicts;
    } else {
      problem = ErrorKind::bad_status;
    }
    if (problem) {
      stats.errors.add(*problem);
    } else {
      ++stats.verified;
      stats.latency.record(static_cast<std::uint64_t>(slot->latency.count()));
    }
  }
  if (outcome.executed == 0) stats.errors.add(ErrorKind::storm_no_execution);
  if (outcome.executed > 1) stats.errors.add(ErrorKind::storm_multiple_executions, outcome.executed - 1);
  return outcome;
}

}  // namespace

StormResult run_storm(const StormSpec& spec) {
  StormResult result;
  const auto started = Clock::now();
  const auto limit = 2 * spec.timeout;
  for (unsigned r = 0; r < spec.rounds; ++r) {
    Round round;
    spec.request->render(spec.key_prefix + "-s" + std::to_string(r), round.request_bytes);
    round.to_connect = spec.connections;
    round.to_finish = spec.connections;
    for (unsigned c = 0; c < spec.connections; ++c) {
      round.slots.push_back(std::make_unique<StormSlot>(round.io));
    }
    for (auto& slot : round.slots) asio::co_spawn(round.io, duplicate(round, *slot, spec.endpoint), asio::detached);
    asio::co_spawn(round.io, round_deadline(round, limit), asio::detached);
    round.io.run_for(limit + kGiveUpGrace);
    for (auto& slot : round.slots) {
      if (!slot->response && !slot->error) slot->error = ErrorKind::timeout;  // the io gave up on it
    }
    result.rounds.push_back(judge(round, spec, result.stats));
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started);
  return result;
}

}  // namespace idem::bench
