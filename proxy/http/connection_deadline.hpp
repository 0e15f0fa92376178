#pragma once
// The deadline of a client connection's current phase (idle, header, body, write), kept the way
// nginx keeps its timers: setting one stores a time. The connection's one timer is re-armed only
// when the new deadline comes before the one it waits for; firing early, it waits again for the
// deadline then in force. A keep-alive request costs no timer operation in the steady state,
// where beast::basic_stream armed and cancelled one per read and per write.
// When the deadline passes the socket is closed, as basic_stream does: the pending operation
// fails, and so would any later one.
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <memory>

namespace idem::http {

class ConnectionDeadline {
 public:
  explicit ConnectionDeadline(boost::asio::ip::tcp::socket& socket);
  ~ConnectionDeadline();  // a wait still pending no longer touches the socket
  ConnectionDeadline(const ConnectionDeadline&) = delete;
  ConnectionDeadline& operator=(const ConnectionDeadline&) = delete;

  void expires_after(std::chrono::steady_clock::duration duration);
  void expires_never();

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the timer's pending wait, which may outlive this
};

}  // namespace idem::http
