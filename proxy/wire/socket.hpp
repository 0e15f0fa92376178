#pragma once
// The stream socket under every HTTP connection, either side: TCP, or a unix socket (a listener
// or an upstream named unix:/path). Asio's generic stream socket carries both with one type, so
// the connection code is written and instantiated once; a TCP socket converts to it by a move.
#include <boost/asio/generic/stream_protocol.hpp>
#include <string>

namespace idem::wire {

using Socket = boost::asio::generic::stream_protocol::socket;
using Endpoint = boost::asio::generic::stream_protocol::endpoint;

// The peer's address for logs and X-Forwarded-For: the IP of a TCP peer, "unix" for a unix
// socket's, "unknown" when the socket cannot tell.
std::string peer_address(const Socket& socket);

}  // namespace idem::wire
