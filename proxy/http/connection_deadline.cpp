#include "http/connection_deadline.hpp"

#include <boost/asio/steady_timer.hpp>

namespace idem::http {
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct ConnectionDeadline::State : std::enable_shared_from_this<State> {
  explicit State(asio::ip::tcp::socket& connection) : timer(connection.get_executor()), socket(&connection) {}

  void wait_until(Clock::time_point at) {
    armed = at;
    timer.expires_at(at);  // a pending wait completes as aborted
    timer.async_wait([self = shared_from_this(), at](const boost::system::error_code& ec) { self->fired(ec, at); });
  }

  void fired(const boost::system::error_code& ec, Clock::time_point at) {
    // Aborted, superseded by a later wait_until, or the connection is gone: not this wait's call.
    if (ec == asio::error::operation_aborted || at != armed || socket == nullptr) return;
    armed = Clock::time_point::max();
    if (deadline == Clock::time_point::max()) return;
    if (Clock::now() < deadline) {
      wait_until(deadline);
      return;
    }
    boost::system::error_code ignored;
    socket->close(ignored);
  }

  asio::steady_timer timer;
  asio::ip::tcp::socket* socket;                          // null once the connection is gone
  Clock::time_point deadline = Clock::time_point::max();  // max: none
  Clock::time_point armed = Clock::time_point::max();     // the pending wait's expiry; max: none
};

ConnectionDeadline::ConnectionDeadline(asio::ip::tcp::socket& socket) : state_(std::make_shared<State>(socket)) {}

ConnectionDeadline::~ConnectionDeadline() {
  state_->socket = nullptr;
  state_->timer.cancel();
}

void ConnectionDeadline::expires_after(Clock::duration duration) {
  State& state = *state_;
  const Clock::time_point now = Clock::now();
  // Saturated: a duration too long to add means no deadline, not one in the past.
  state.deadline = duration < Clock::time_point::max() - now ? now + duration : Clock::time_point::max();
  if (state.deadline < state.armed) state.wait_until(state.deadline);
}

void ConnectionDeadline::expires_never() { state_->deadline = Clock::time_point::max(); }

}  // namespace idem::http
