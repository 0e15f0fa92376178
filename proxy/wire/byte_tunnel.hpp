#pragma once
// After a 101 (Switching Protocols) the client's connection and the upstream's become one byte
// tunnel: two half-duplex copy loops, each through one fixed window (what a read brings is
// written out before the next read, so a slow side holds the other back through TCP and memory
// does not grow with traffic), until both directions have ended or either failed.
//
// Half-close is passed on: a side's end of stream (TCP FIN; over TLS a close_notify, or a close
// without one) becomes a shutdown of sending toward the other side (FIN, or close_notify), whose
// other direction goes on until it ends too. One idle timer, moved on by every byte either way,
// closes both sides when nothing moved for `idle_timeout` (nginx's proxy_read_timeout on an
// upgraded connection). Each write has its End's own no-progress deadline.
//
// An End offers:
//   awaitable<IoResult> read_some(asio::mutable_buffer)   no deadline: the idle timer watches
//   awaitable<IoResult> write(const asio::const_buffer&)  every byte, or an error (its deadline's
//                                                         passing reported as beast::error::timeout);
//                                                         the buffer outlives the awaitable
//   awaitable<void> shutdown_send()                       the peer reads the end of the stream
//   void close()                                          pending operations fail at once
// Both Ends run on the calling coroutine's executor (one io thread): nothing here blocks it.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "wire/body_pump.hpp"

namespace idem::wire {

// What one direction's read or write moves at most: a TLS record's worth.
inline constexpr std::size_t kTunnelWindow = 16 * 1024;

enum class TunnelEnd {
  closed,  // both directions reached their end of stream
  idle,    // nothing moved either way for the idle timeout
  failed,  // a read or a write failed (`ec`), or a write's deadline passed (timeout)
};

enum class TunnelSide { client, upstream };

struct TunnelResult {
  TunnelEnd end = TunnelEnd::closed;
  boost::system::error_code ec;                 // failed: the first failure
  TunnelSide failed_side = TunnelSide::client;  // failed: whose read or write it was
  std::uint64_t client_to_upstream = 0;         // bytes the upstream took, what the parser had buffered included
  std::uint64_t upstream_to_client = 0;         // bytes the client took (after the 101's head)
};

// The end of one direction's stream: the peer closed its sending side (over TLS with or without
// a close_notify: the bytes before it were all delivered either way).
inline bool is_end_of_stream(const boost::system::error_code& ec) {
  return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
}

namespace detail {

// The idle timer: armed for the idle timeout, moved on by traffic (touching records the time
// only; the timer, when it fires early, waits again for the rest), closing both sides when it
// passes. Shared with its pending wait, which may complete after the tunnel ended.
struct IdleWatch {
  IdleWatch(const asio::any_io_executor& executor, std::chrono::steady_clock::duration timeout,
            std::function<void()> close_both)
      : timer(executor), timeout(timeout), close_both(std::move(close_both)) {}
  asio::steady_timer timer;
  std::chrono::steady_clock::duration timeout;
  std::function<void()> close_both;
  std::chrono::steady_clock::time_point last_traffic = std::chrono::steady_clock::now();
  bool active = true;
  bool fired = false;

  void touch() { last_traffic = std::chrono::steady_clock::now(); }
  static void arm(const std::shared_ptr<IdleWatch>& watch) {
    watch->timer.expires_at(watch->last_traffic + watch->timeout);
    watch->timer.async_wait([watch](const boost::system::error_code&) {
      if (!watch->active) return;
      if (std::chrono::steady_clock::now() < watch->last_traffic + watch->timeout) {
        arm(watch);
        return;
      }
      watch->fired = true;
      watch->close_both();
    });
  }
  void end() {
    active = false;
    timer.cancel();
  }
};

// What the two directions share: the first failure, and whether both sides were closed for it.
struct TunnelState {
  TunnelResult result;
  bool closing = false;
};

template <class From, class To, class CloseBoth>
asio::awaitable<void> copy_direction(From& from, To& to, TunnelSide from_side, std::string_view first,
                                     std::uint64_t& moved, IdleWatch& idle, TunnelState& state, CloseBoth close_both) {
  const TunnelSide to_side = from_side == TunnelSide::client ? TunnelSide::upstream : TunnelSide::client;
  auto fail = [&](const boost::system::error_code& ec, TunnelSide side) {
    if (state.closing) return;  // an operation the first failure (or the idle timer) cut short
    state.closing = true;
    state.result.end = TunnelEnd::failed;
    state.result.ec = ec;
    state.result.failed_side = side;
    close_both();
  };
  if (!first.empty()) {
    const asio::const_buffer bytes(first.data(), first.size());
    auto [ec, n] = co_await to.write(bytes);
    moved += n;
    idle.touch();
    if (ec) {
      fail(ec, to_side);
      co_return;
    }
  }
  std::array<char, kTunnelWindow> window;
  // (Named buffers and awaitables, not temporaries, in co_await expressions: GCC 12 mishandles them.)
  const asio::mutable_buffer space(window.data(), window.size());
  for (;;) {
    auto [read_ec, got] = co_await from.read_some(space);
    if (got > 0) {
      idle.touch();
      const asio::const_buffer bytes(window.data(), got);
      auto [write_ec, written] = co_await to.write(bytes);
      moved += written;
      idle.touch();
      if (write_ec) {
        fail(write_ec, to_side);
        co_return;
      }
    }
    if (!read_ec) continue;
    if (is_end_of_stream(read_ec) && !state.closing) {
      co_await to.shutdown_send();
      co_return;
    }
    fail(read_ec, from_side);
    co_return;
  }
}

}  // namespace detail

// Runs the tunnel until both directions ended or either failed. `to_upstream_first`: bytes the
// client sent past its request that the parser already holds; `to_client_first`: the 101's head
// and the bytes that came with it. Neither End is closed on return: the caller closes both (a
// tunnel's connections are never reused).
template <class ClientEnd, class UpstreamEnd>
asio::awaitable<TunnelResult> run_tunnel(ClientEnd& client, UpstreamEnd& upstream, std::string_view to_upstream_first,
                                         std::string_view to_client_first,
                                         std::chrono::steady_clock::duration idle_timeout) {
  using namespace boost::asio::experimental::awaitable_operators;
  detail::TunnelState state;
  auto close_both = [&client, &upstream] {
    client.close();
    upstream.close();
  };
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  const auto idle = std::make_shared<detail::IdleWatch>(executor, idle_timeout, [&] {
    state.closing = true;
    close_both();
  });
  detail::IdleWatch::arm(idle);
  asio::awaitable<void> upward = detail::copy_direction(client, upstream, TunnelSide::client, to_upstream_first,
                                                        state.result.client_to_upstream, *idle, state, close_both);
  asio::awaitable<void> downward = detail::copy_direction(upstream, client, TunnelSide::upstream, to_client_first,
                                                          state.result.upstream_to_client, *idle, state, close_both);
  asio::awaitable<void> both = std::move(upward) && std::move(downward);
  co_await std::move(both);
  idle->end();
  if (idle->fired && state.result.end != TunnelEnd::failed) state.result.end = TunnelEnd::idle;
  co_return state.result;
}

}  // namespace idem::wire
