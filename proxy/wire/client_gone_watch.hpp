#pragma once
// Tells, while the proxy waits on the upstream for a streamed response, that the client has gone
// (closed or reset its connection), so the upstream connection is closed at once rather than when
// the next write to the client fails (a live feed may not write for minutes). It waits for the
// client's socket to become readable and peeks: nothing (the close) or an error is the client
// gone; bytes (a pipelined request, a TLS record) mean it is there, and the watch ends.
#include <memory>

#include "wire/socket.hpp"

namespace idem::wire {

class ClientGoneWatch {
 public:
  // `client` (the TCP layer under TLS too) must outlive the watch's armed wait or the watch.
  explicit ClientGoneWatch(Socket& client) : client_(client) {}
  // Ends the watch: a wait still pending is cancelled and does nothing when it completes.
  ~ClientGoneWatch();
  ClientGoneWatch(const ClientGoneWatch&) = delete;
  ClientGoneWatch& operator=(const ClientGoneWatch&) = delete;

  // Starts watching, once (later calls do nothing): when the client goes, `upstream` is closed
  // (its pending operations fail) and client_gone() turns true. `upstream` must stay open or
  // alive until the watch ends.
  void arm(Socket& upstream);
  bool client_gone() const { return state_ && state_->gone; }

 private:
  struct State {
    Socket* client;
    Socket* upstream;
    bool active = true;
    bool gone = false;
  };
  static void wait(const std::shared_ptr<State>& state);

  Socket& client_;
  std::shared_ptr<State> state_;  // shared with the pending wait, which may complete after the watch ended
};

}  // namespace idem::wire
