#include "failure/raw_client_socket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace idem::test::failure {

RawClientSocket::RawClientSocket(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + ": " + reason);
  }
}

RawClientSocket::~RawClientSocket() {
  if (fd_ >= 0) ::close(fd_);
}

void RawClientSocket::write_all(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
}

void RawClientSocket::close_with_fin() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

void RawClientSocket::close_with_reset() {
  if (fd_ < 0) return;
  const linger abort_on_close{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  ::close(fd_);
  fd_ = -1;
}

}  // namespace idem::test::failure
