#pragma once
// A bare TCP client for the tests that hang up on the proxy: write a request, then close the
// socket politely (FIN) or abortively (RST), without reading anything.
#include <cstdint>
#include <string_view>

namespace idem::test::failure {

class RawClientSocket {
 public:
  // Connects to 127.0.0.1:port. Throws std::runtime_error when it cannot.
  explicit RawClientSocket(std::uint16_t port);
  ~RawClientSocket();
  RawClientSocket(const RawClientSocket&) = delete;
  RawClientSocket& operator=(const RawClientSocket&) = delete;

  // Writes every byte. Throws std::runtime_error on failure.
  void write_all(std::string_view bytes);
  // close(): the peer reads EOF after the bytes already sent.
  void close_with_fin();
  // SO_LINGER {1, 0} then close(): the peer gets a connection reset.
  void close_with_reset();

 private:
  int fd_ = -1;
};

}  // namespace idem::test::failure
