#include "wire/socket.hpp"

#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <cstring>

namespace idem::wire {

std::string peer_address(const Socket& socket) {
  boost::system::error_code ec;
  const Endpoint peer = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  const int family = peer.data()->sa_family;
  if (family == AF_UNIX) return "unix";
  if (family != AF_INET && family != AF_INET6) return "unknown";
  boost::asio::ip::tcp::endpoint ip;
  if (peer.size() > ip.capacity()) return "unknown";
  std::memcpy(ip.data(), peer.data(), peer.size());
  ip.resize(peer.size());
  return ip.address().to_string();
}

}  // namespace idem::wire
