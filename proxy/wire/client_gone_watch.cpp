#include "wire/client_gone_watch.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace idem::wire {

ClientGoneWatch::~ClientGoneWatch() {
  if (!state_) return;
  state_->active = false;
  boost::system::error_code ignored;
  // Nothing else waits on the client's socket while the proxy waits on the upstream.
  client_.cancel(ignored);
}

void ClientGoneWatch::arm(Socket& upstream) {
  if (state_) return;
  state_ = std::make_shared<State>(State{.client = &client_, .upstream = &upstream});
  wait(state_);
}

void ClientGoneWatch::wait(const std::shared_ptr<State>& state) {
  state->client->async_wait(boost::asio::socket_base::wait_read, [state](const boost::system::error_code& ec) {
    if (!state->active || ec) return;  // ended, cancelled, or the socket closed under it
    char byte;
    const ssize_t n = ::recv(state->client->native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;  // the client sent something: it is there
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      wait(state);  // a readiness that went stale
      return;
    }
    state->gone = true;
    boost::system::error_code ignored;
    state->upstream->close(ignored);
  });
}

}  // namespace idem::wire
