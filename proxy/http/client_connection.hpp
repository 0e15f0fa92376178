#pragma once
// One client connection's request/response loop (HTTP/1.1 keep-alive), with a deadline on every
// read and write and the configured bounds on headers and bodies.
#include <boost/asio/awaitable.hpp>

#include "http/runtime.hpp"
#include "wire/socket.hpp"
#include "wire/socket_deadline.hpp"

namespace idem::http {

struct ClientConnection {
  explicit ClientConnection(wire::Socket client) : socket(std::move(client)) {}
  void close();  // idempotent; cancels pending reads and writes
  // Closes with a reset: for a body ended by the close that was cut, where a FIN would tell the
  // client the body is complete.
  void reset();

  wire::Socket socket;                    // TCP, or a unix socket of a unix listener
  wire::SocketDeadline deadline{socket};  // of the phase under way: set on the TCP layer, under TLS too
  // From the first byte of a request until its response is written: a draining worker waits for
  // such connections and closes the others.
  bool in_request = false;
};

// Serves requests until the client closes, a deadline passes, an error occurs, or `draining`
// becomes true (the response then carries Connection: close).
boost::asio::awaitable<void> serve_client(ClientConnection& connection, WorkerServices& services, const bool& draining);

// Answers 503 (too many connections) and returns; the caller closes the connection.
boost::asio::awaitable<void> refuse_connection(ClientConnection& connection, WorkerServices& services);

}  // namespace idem::http
