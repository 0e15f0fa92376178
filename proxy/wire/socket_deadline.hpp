#pragma once
// One deadline for every operation on a socket, kept by a timer that is seldom touched. A
// connection's deadline moves with each exchange; re-arming a timer for each (and beast's
// tcp_stream arms one for each read and write) costs a cancel and a wait in the reactor every
// time. Here moving the deadline later only records it: the timer, armed for the earlier time,
// fires, finds the deadline moved and waits again for it. A keep-alive connection's timer thus
// fires about once per timeout, whatever the number of exchanges.
//
// When the deadline passes, the socket is closed (as tcp_stream does): an operation then pending
// fails at once, and so does every later one. `expired()` tells such a failure from a lost
// connection.
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>

#include "wire/socket.hpp"

namespace idem::wire {

class SocketDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `socket` must outlive this.
  explicit SocketDeadline(Socket& socket);
  ~SocketDeadline();
  SocketDeadline(const SocketDeadline&) = delete;
  SocketDeadline& operator=(const SocketDeadline&) = delete;

  void expire_at(Clock::time_point when);
  // Saturated: a timeout too long to add means no deadline, not one in the past.
  void expire_after(Clock::duration timeout) {
    const Clock::time_point now = Clock::now();
    expire_at(timeout < Clock::time_point::max() - now ? now + timeout : Clock::time_point::max());
  }
  void expire_never() { state_->deadline = Clock::time_point::max(); }
  // The deadline passed and closed the socket.
  bool expired() const { return state_->expired; }

 private:
  // Shared with the pending wait: a wait that completed just before the stream was destroyed
  // still runs, and must find out that the socket is gone.
  struct State {
    explicit State(Socket& s) : socket(&s), timer(s.get_executor()) {}
    Socket* socket;  // null once the owner is destroyed
    boost::asio::steady_timer timer;
    Clock::time_point deadline = Clock::time_point::max();
    Clock::time_point armed_for = Clock::time_point::max();  // max: no wait pending
    std::uint64_t wait = 0;                                  // the pending wait's number
    bool expired = false;
  };
  static void arm(const std::shared_ptr<State>& state, Clock::time_point when);
  static void on_timer(const std::shared_ptr<State>& state, std::uint64_t wait);

  std::shared_ptr<State> state_;
};

}  // namespace idem::wire
