#include "idle_hold.hpp"

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
#include <thread>
#include <vector>

namespace idem::bench {
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr unsigned kSetupConcurrency = 32;  // below the proxy's upstream pool: setup never gets a 503
constexpr std::chrono::milliseconds kWatchdogTick{20};
constexpr Clock::time_point kNotBusy = Clock::time_point::max();

struct IdleSlot {
  explicit IdleSlot(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  Clock::time_point busy_since = kNotBusy;
  bool timed_out = false;
};

struct Setup {
  asio::io_context io{1};
  const IdleSpec& spec;
  std::vector<std::unique_ptr<IdleSlot>> slots;
  PhaseStats stats;
  unsigned next = 0;
  unsigned workers_left = 0;
  explicit Setup(const IdleSpec& s) : spec(s) {}
};

// Takes the next connection to open until none is left: connect, one request, verify, keep open.
asio::awaitable<void> open_connections(Setup& setup) {
  std::string key;
  std::string request_bytes;
  Expectation expected;
  beast::flat_buffer buffer;
  while (setup.next < setup.slots.size()) {
    const unsigned index = setup.next++;
    IdleSlot& slot = *setup.slots[index];
    auto fail = [&](ErrorKind kind) {
      setup.stats.errors.add(slot.timed_out ? ErrorKind::timeout : kind);
      slot.busy_since = kNotBusy;
      boost::system::error_code ignored;
      slot.socket.close(ignored);
    };
    slot.busy_since = Clock::now();
    auto [connect_ec] = co_await slot.socket.async_connect(setup.spec.endpoint, use_tuple);
    if (connect_ec) {
      fail(ErrorKind::connect_failed);
      continue;
    }
    ++setup.stats.connects;
    setup.spec.plan->next(index, 0, key, expected);
    setup.spec.request->render(key, request_bytes);
    const auto sent = Clock::now();
    auto [write_ec, written] = co_await asio::async_write(slot.socket, asio::buffer(request_bytes), use_tuple);
    if (write_ec) {
      fail(ErrorKind::write_failed);
      continue;
    }
    buffer.clear();
    beast::http::response_parser<beast::http::string_body> parser;
    auto [read_ec, read] = co_await beast::http::async_read(slot.socket, buffer, parser, use_tuple);
    if (read_ec) {
      fail(ErrorKind::read_failed);
      continue;
    }
    slot.busy_since = kNotBusy;
    const Response& response = parser.get();
    ++setup.stats.responses;
    setup.stats.count_status(response.result_int());
    if (const auto problem = check_response(response, expected)) {
      fail(*problem);
      continue;
    }
    if (!response.keep_alive()) {
      fail(ErrorKind::read_failed);  // the server would not keep it: no idle connection to hold
      continue;
    }
    ++setup.stats.verified;
    setup.stats.latency.record(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent).count()));
  }
  --setup.workers_left;
}

asio::awaitable<void> setup_watchdog(Setup& setup) {
  asio::steady_timer timer(setup.io);
  while (setup.workers_left > 0) {
    timer.expires_after(kWatchdogTick);
    co_await timer.async_wait(use_tuple);
    const auto now = Clock::now();
    for (auto& slot : setup.slots) {
      if (slot->busy_since != kNotBusy && now - slot->busy_since > setup.spec.timeout) {
        slot->timed_out = true;
        boost::system::error_code ignored;
        slot->socket.close(ignored);
      }
    }
  }
}

}  // namespace

IdleResult run_idle_hold(const IdleSpec& spec, const std::function<void()>& on_held,
                         const std::function<void()>& tick) {
  Setup setup(spec);
  for (unsigned i = 0; i < spec.connections; ++i) setup.slots.push_back(std::make_unique<IdleSlot>(setup.io));
  const auto started = Clock::now();
  const unsigned workers = std::min(kSetupConcurrency, spec.connections);
  setup.workers_left = workers;
  for (unsigned w = 0; w < workers; ++w) asio::co_spawn(setup.io, open_connections(setup), asio::detached);
  asio::co_spawn(setup.io, setup_watchdog(setup), asio::detached);
  // Every connection costs at most two timeouts (connect, request), kSetupConcurrency at a time.
  const auto waves = (spec.connections + workers - 1) / workers;
  setup.io.run_for(2 * spec.timeout * waves + std::chrono::seconds(1));

  IdleResult result;
  result.setup = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started);
  for (const auto& slot : setup.slots) {
    if (slot->socket.is_open() && slot->busy_since == kNotBusy) ++result.established;
  }
  if (on_held) on_held();
  // Held with nothing pending on them: the sockets just stay open until they are destroyed.
  const auto hold_end = Clock::now() + spec.hold;
  auto next_tick = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < hold_end) {
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(50), hold_end - Clock::now()));
    if (tick && Clock::now() >= next_tick) {
      tick();
      next_tick += std::chrono::seconds(1);
    }
  }
  result.stats = setup.stats;
  return result;
}

}  // namespace idem::bench
