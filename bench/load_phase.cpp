#include "load_phase.hpp"

#include <algorithm>
#include <atomic>
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
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

namespace idem::bench {
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::milliseconds kWatchdogTick{20};
constexpr std::chrono::milliseconds kReconnectBackoff{10};
constexpr std::chrono::seconds kHardStopGrace{1};
constexpr std::uint64_t kMaxResponseBody = 1 << 20;
constexpr Clock::time_point kNotBusy = Clock::time_point::max();

struct ConnectionSlot {
  ConnectionSlot(asio::io_context& io, unsigned connection_index) : socket(io), timer(io), index(connection_index) {}
  tcp::socket socket;
  asio::steady_timer timer;  // open-loop schedule and reconnect backoff
  beast::flat_buffer buffer;
  std::string request_bytes;
  std::string key;
  unsigned index;
  Clock::time_point busy_since = kNotBusy;  // a connect or request is in progress since
  bool timed_out = false;                   // the watchdog closed it
};

// One io thread's share of a phase. The io_context is declared first so it is destroyed last:
// every socket and timer deregisters from a live reactor.
struct ThreadRun {
  ThreadRun(const LoadPhaseSpec& phase_spec, std::atomic<std::int64_t>* request_budget)
      : spec(phase_spec), budget(request_budget) {}
  asio::io_context io{1};
  const LoadPhaseSpec& spec;
  std::atomic<std::int64_t>* budget;  // null: unlimited
  std::vector<std::unique_ptr<ConnectionSlot>> slots;
  PhaseStats stats;
  unsigned live = 0;
  Clock::time_point start;
  Clock::time_point stop;
  Clock::time_point hard_stop;
  Clock::time_point finished;  // the last connection of this thread ended
};

void close_slot(ConnectionSlot& slot) {
  boost::system::error_code ignored;
  slot.socket.close(ignored);
  slot.buffer.clear();
}

void fail(ThreadRun& run, ConnectionSlot& slot, ErrorKind kind) {
  run.stats.errors.add(slot.timed_out ? ErrorKind::timeout : kind);
  slot.busy_since = kNotBusy;
  close_slot(slot);
}

asio::awaitable<bool> connect(ThreadRun& run, ConnectionSlot& slot) {
  slot.buffer.clear();
  slot.timed_out = false;
  slot.busy_since = Clock::now();
  auto [ec] = co_await slot.socket.async_connect(run.spec.endpoint, use_tuple);
  if (ec) {
    fail(run, slot, ErrorKind::connect_failed);
    co_return false;
  }
  slot.busy_since = kNotBusy;
  boost::system::error_code ignored;
  slot.socket.set_option(tcp::no_delay(true), ignored);
  ++run.stats.connects;
  co_return true;
}

bool take_budget(ThreadRun& run) {
  return run.budget == nullptr || run.budget->fetch_sub(1, std::memory_order_relaxed) > 0;
}

asio::awaitable<void> drive_connection(ThreadRun& run, ConnectionSlot& slot) {
  const LoadPhaseSpec& spec = run.spec;
  const bool open_loop = spec.rate > 0;
  const double interval_ns = open_loop ? 1e9 * spec.connections / spec.rate : 0.0;
  const double offset_ns = open_loop ? 1e9 * slot.index / spec.rate : 0.0;
  Expectation expected;

  for (std::uint64_t sequence = 0;; ++sequence) {
    Clock::time_point intended{};
    if (open_loop) {
      intended = run.start + std::chrono::nanoseconds(
                                 std::llround(offset_ns + static_cast<double>(sequence) * interval_ns));
      if (intended >= run.stop) break;
    }
    if (Clock::now() >= run.stop) break;
    if (!spec.plan->next(slot.index, sequence, slot.key, expected)) break;
    if (!take_budget(run)) break;

    if (!slot.socket.is_open()) {
      const bool connected = co_await connect(run, slot);
      if (!connected) {
        slot.timer.expires_after(kReconnectBackoff);
        co_await slot.timer.async_wait(use_tuple);
        continue;
      }
    }
    if (open_loop && Clock::now() < intended) {
      slot.timer.expires_at(intended);
      co_await slot.timer.async_wait(use_tuple);
      if (Clock::now() >= run.hard_stop) break;
    }

    spec.request->render(slot.key, slot.request_bytes);
    const Clock::time_point sent = Clock::now();
    slot.timed_out = false;
    slot.busy_since = sent;
    auto [write_ec, written] = co_await asio::async_write(slot.socket, asio::buffer(slot.request_bytes), use_tuple);
    if (write_ec) {
      fail(run, slot, ErrorKind::write_failed);
      continue;
    }
    beast::http::response_parser<beast::http::string_body> parser;
    parser.body_limit(kMaxResponseBody);
    auto [read_ec, read] = co_await beast::http::async_read(slot.socket, slot.buffer, parser, use_tuple);
    const Clock::time_point received = Clock::now();
    if (read_ec) {
      fail(run, slot, ErrorKind::read_failed);
      continue;
    }
    slot.busy_since = kNotBusy;

    const Response& response = parser.get();
    ++run.stats.responses;
    run.stats.count_status(response.result_int());
    if (const auto problem = check_response(response, expected)) {
      run.stats.errors.add(*problem);
    } else {
      ++run.stats.verified;
      const auto from = open_loop ? intended : sent;
      run.stats.latency.record(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(received - from).count()));
      spec.plan->on_verified(slot.index, sequence, response);
    }
    if (!response.keep_alive()) close_slot(slot);  // the server ends the connection: reconnect next time
  }
  close_slot(slot);
  if (--run.live == 0) run.finished = Clock::now();
}

// Closes connections stuck beyond the timeout; past the hard stop, everything.
asio::awaitable<void> watchdog(ThreadRun& run) {
  asio::steady_timer timer(run.io);
  while (run.live > 0) {
    timer.expires_after(kWatchdogTick);
    co_await timer.async_wait(use_tuple);
    const auto now = Clock::now();
    const bool past_hard_stop = now >= run.hard_stop;
    for (auto& slot : run.slots) {
      const bool busy = slot->busy_since != kNotBusy;
      if (busy && (past_hard_stop || now - slot->busy_since > run.spec.timeout)) {
        slot->timed_out = true;
        boost::system::error_code ignored;
        slot->socket.close(ignored);
      }
      if (past_hard_stop) slot->timer.cancel();
    }
  }
}

}  // namespace

tcp::endpoint resolve_endpoint(const std::string& host, std::uint16_t port) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(address, port);
  asio::io_context io;
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port));  // throws: start-up only
  return results.begin()->endpoint();
}

PhaseResult run_load_phase(const LoadPhaseSpec& spec, const std::function<void()>& tick) {
  std::atomic<std::int64_t> budget(static_cast<std::int64_t>(spec.max_requests));
  const unsigned threads = std::max(1u, std::min(spec.threads, spec.connections));
  std::vector<std::unique_ptr<ThreadRun>> runs;
  for (unsigned t = 0; t < threads; ++t) {
    runs.push_back(std::make_unique<ThreadRun>(spec, spec.max_requests > 0 ? &budget : nullptr));
  }
  for (unsigned c = 0; c < spec.connections; ++c) {
    ThreadRun& run = *runs[c % threads];
    run.slots.push_back(std::make_unique<ConnectionSlot>(run.io, c));
  }

  const Clock::time_point start = Clock::now();
  const Clock::time_point stop = start + spec.duration;
  const Clock::time_point hard_stop = stop + spec.timeout + kHardStopGrace;
  std::atomic<unsigned> running(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    ThreadRun& run = *runs[t];
    run.start = start;
    run.stop = stop;
    run.hard_stop = hard_stop;
    run.live = static_cast<unsigned>(run.slots.size());
    for (auto& slot : run.slots) asio::co_spawn(run.io, drive_connection(run, *slot), asio::detached);
    asio::co_spawn(run.io, watchdog(run), asio::detached);
    run.finished = start;
    workers.emplace_back([&run, &running, hard_stop] {
      run.io.run_until(hard_stop + kHardStopGrace);
      if (run.live > 0) run.finished = Clock::now();  // gave up on stragglers
      running.fetch_sub(1);
    });
  }

  auto next_tick = start + std::chrono::seconds(1);
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (tick && Clock::now() >= next_tick) {
      tick();
      next_tick += std::chrono::seconds(1);
    }
  }
  for (auto& worker : workers) worker.join();

  PhaseResult result;
  Clock::time_point last = start;
  for (auto& run : runs) {
    result.stats.merge(run->stats);
    last = std::max(last, run->finished);
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(last - start);
  return result;
}

}  // namespace idem::bench
