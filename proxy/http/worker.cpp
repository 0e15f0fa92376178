#include "http/worker.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <type_traits>

#include "http/client_connection.hpp"
#include "http/upstream.hpp"
#include "log/log.hpp"

namespace idem::http {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
std::optional<tcp::acceptor> bind_acceptor(asio::io_context& io, const ListenOptions& listen) {
  if (!listen.tcp) return std::nullopt;
  const tcp::endpoint endpoint(asio::ip::make_address(listen.host), listen.port);
  tcp::acceptor acceptor(io);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  // Every worker binds the same address; the kernel balances new connections between them.
  const int on = 1;
  if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
    throw boost::system::system_error(errno, boost::system::system_category(), "SO_REUSEPORT");
  }
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  return acceptor;
}
}  // namespace

Worker::Worker(asio::io_context& io, WorkerServices services, int unix_listener)
    : io_(io), services_(std::move(services)), acceptor_(bind_acceptor(io, services_.config->options.listen)) {
  if (unix_listener < 0) return;
  const int own = ::fcntl(unix_listener, F_DUPFD_CLOEXEC, 0);
  if (own < 0) throw boost::system::system_error(errno, boost::system::system_category(), "dup");
  try {
    unix_acceptor_.emplace(io, asio::local::stream_protocol(), own);
  } catch (...) {
    ::close(own);
    throw;
  }
}

void Worker::start() {
  services_.background.on_idle([this] { check_drained(); });
  if (acceptor_) asio::co_spawn(io_, accept_loop(*acceptor_), asio::detached);
  if (unix_acceptor_) asio::co_spawn(io_, accept_loop(*unix_acceptor_), asio::detached);
}

template <class Acceptor>
asio::awaitable<void> Worker::accept_loop(Acceptor& acceptor) {
  while (!draining_) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (ec == asio::error::operation_aborted || draining_) break;
      // EMFILE and friends: log and keep accepting rather than dying.
      log::warn("accept_failed", {{"error", ec.message()}});
      continue;
    }
    // A streamed body goes out a window at a time: Nagle's algorithm would hold each window's
    // tail (and a feed's next event) until the client acknowledges the last one (nginx's
    // tcp_nodelay, on by default).
    if constexpr (std::is_same_v<Acceptor, tcp::acceptor>) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
    }
    asio::co_spawn(io_, serve(wire::Socket(std::move(socket))), asio::detached);
  }
}

asio::awaitable<void> Worker::serve(wire::Socket socket) {
  ClientConnection connection(std::move(socket));
  connections_.insert(&connection);
  // Counted per process: past limits.max_connections a new client gets a 503 and the close,
  // instead of taking memory and file descriptors the established ones need.
  const std::size_t open = services_.connections.fetch_add(1) + 1;
  if (open > services_.config->options.limits.max_connections) {
    co_await refuse_connection(connection, services_);
  } else {
    // Nothing a client sends may end the worker or leak this connection's slot: whatever escapes
    // the session (a library that throws on a message it does not like) ends this connection only.
    try {
      co_await serve_client(connection, services_, draining_);
    } catch (const std::exception& error) {
      log::error("session_failed", {{"error", error.what()}});
    }
  }
  services_.connections.fetch_sub(1);
  connection.close();
  connections_.erase(&connection);
  check_drained();
}

void Worker::drain(std::function<void()> on_drained) {
  asio::post(io_, [this, on_drained = std::move(on_drained)]() mutable {
    if (draining_) return;
    draining_ = true;
    on_drained_ = std::move(on_drained);
    boost::system::error_code ignored;
    if (acceptor_) acceptor_->close(ignored);
    if (unix_acceptor_) unix_acceptor_->close(ignored);
    for (ClientConnection* connection : connections_) {
      if (!connection->in_request) connection->close();
    }
    check_drained();
  });
}

void Worker::update_config(std::shared_ptr<const RuntimeConfig> config) {
  asio::post(io_, [this, config = std::move(config)]() mutable { services_.config = std::move(config); });
}

void Worker::check_drained() {
  if (!draining_ || !connections_.empty() || services_.background.count() != 0 || !on_drained_) return;
  for (Upstream* upstream : services_.upstreams) upstream->close_idle();
  auto done = std::move(on_drained_);
  on_drained_ = nullptr;
  done();
}

}  // namespace idem::http
