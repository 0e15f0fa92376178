#include "wire/socket_deadline.hpp"

namespace idem::wire {

SocketDeadline::SocketDeadline(Socket& socket) : state_(std::make_shared<State>(socket)) {}

// A destructor must not throw; the cancel only throws on a reactor error, and the wait it would
// end finds the socket gone either way.
SocketDeadline::~SocketDeadline() {
  state_->socket = nullptr;
  try {
    state_->timer.cancel();
  } catch (...) {  // NOLINT(bugprone-empty-catch): see above
  }
}

void SocketDeadline::expire_at(Clock::time_point when) {
  state_->deadline = when;
  // A wait pending for an earlier time re-arms itself for `when` when it fires.
  if (state_->armed_for <= when) return;
  arm(state_, when);
}

void SocketDeadline::arm(const std::shared_ptr<State>& state, Clock::time_point when) {
  state->timer.expires_at(when);  // cancels a wait pending for a later time: its number is stale
  state->armed_for = when;
  const std::uint64_t wait = ++state->wait;
  state->timer.async_wait([state, wait](const boost::system::error_code&) { on_timer(state, wait); });
}

void SocketDeadline::on_timer(const std::shared_ptr<State>& state, std::uint64_t wait) {
  if (state->socket == nullptr || wait != state->wait) return;  // stream gone, or re-armed since
  state->armed_for = Clock::time_point::max();
  if (state->deadline == Clock::time_point::max()) return;  // no deadline now: the next one arms
  if (Clock::now() < state->deadline) {
    arm(state, state->deadline);
    return;
  }
  state->expired = true;
  boost::system::error_code ignored;
  state->socket->close(ignored);
}

}  // namespace idem::wire
