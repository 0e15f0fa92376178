#pragma once
// What bounds a client connection (`limits:`): plain values, shared by the config that parses them
// (config::LimitsConfig names this type) and the client session that applies them.
#include <chrono>
#include <cstddef>

namespace idem::http {

struct ClientLimits {
  std::size_t max_request_body = 10 * 1024 * 1024;   // 413 beyond (a route may set its own)
  std::size_t max_header_bytes = 16 * 1024;          // request line + headers; 431 beyond
  std::size_t max_request_line = 8 * 1024;           // method, target and version; 414 beyond
  std::chrono::milliseconds header_timeout{10'000};  // time to receive a request's headers
  std::chrono::milliseconds body_timeout{30'000};    // time to receive a request's body
  std::chrono::milliseconds idle_timeout{60'000};    // keep-alive idle time before the proxy closes
  std::chrono::milliseconds write_timeout{30'000};   // time to write a response to the client
  std::size_t max_waiting = 1024;        // duplicates waiting (in_flight: wait) per process; beyond, 409 at once
  std::size_t max_headers = 100;         // header fields per request; 431 beyond
  std::size_t max_connections = 10'000;  // client connections per process; beyond, 503 and close
  // An upgraded connection (a WebSocket tunnel) with no byte moving either way for this long is
  // closed (nginx's proxy_read_timeout on an upgraded connection, Envoy's stream idle timeout).
  std::chrono::milliseconds tunnel_idle_timeout{300'000};
};

}  // namespace idem::http
