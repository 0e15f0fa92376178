#pragma once
// Loopback port helpers for tests that start servers.
#include <netinet/in.h>

#include <chrono>
#include <cstdint>

namespace idem::test {

// A port that was free on 127.0.0.1 a moment ago (bound to :0, read back, closed). Another process
// may take it before the caller binds it; callers that can, retry with a fresh port.
// Throws std::runtime_error when no socket can be bound.
std::uint16_t free_port();

// A free port held bound, not listening, on 127.0.0.1: no other socket can take it (not even a
// listener bound to port 0, which the kernel gives a free port) and a connect to it is refused,
// until release() or destruction. For "nothing listens there yet" without the port going free.
// `for_reuseport`: bound with SO_REUSEPORT, so the one server meant to have the port (idemproxy's
// workers bind theirs so) can bind it while it is still held: released once that server listens,
// the port never goes free in between, when another test's server, sharing ports the same way,
// could silently join it and take half its connections.
class PortReservation {
 public:
  explicit PortReservation(bool for_reuseport = false);
  ~PortReservation();
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  std::uint16_t port() const { return port_; }
  void release();

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// 127.0.0.1:port as the socket calls take it.
sockaddr_in loopback(std::uint16_t port);

// True when a TCP connect to 127.0.0.1:port succeeds now.
bool port_accepts(std::uint16_t port);

// Polls port_accepts until it succeeds or timeout passes.
bool wait_for_port(std::uint16_t port, std::chrono::milliseconds timeout);

}  // namespace idem::test
