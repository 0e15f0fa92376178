#pragma once
// One worker: an acceptor on the shared listen address (SO_REUSEPORT: the kernel spreads
// connections across workers) and one on the unix listener when there is one, the client
// connections it accepted, and their lifecycle.
// Everything here runs on the worker's single io thread; drain() may be called from any thread.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_set>

#include "http/runtime.hpp"
#include "wire/socket.hpp"

namespace idem::http {

struct ClientConnection;

class Worker {
 public:
  // Binds the listen address at once (throws boost::system::system_error when it cannot), so a
  // bad address or a busy port fails start-up instead of a worker thread. `unix_listener`: the
  // process's listening unix socket (http/unix_listener.hpp), accepted on through a duplicate; -1: none.
  Worker(boost::asio::io_context& io, WorkerServices services, int unix_listener = -1);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void start();  // begins accepting (call before io.run())
  // Graceful stop: no new connections; idle keep-alive connections are closed; requests in
  // progress finish and their responses carry `Connection: close`. When the last connection is
  // gone and no background work (completion retries) is left, `on_drained` runs on the io thread (the owner then stops
  // the store so io.run() returns).
  void drain(std::function<void()> on_drained);

  // Hot reload: requests that start after this use `config` (posted to the io thread).
  void update_config(std::shared_ptr<const RuntimeConfig> config);

  std::size_t connection_count() const { return connections_.size(); }

 private:
  friend struct ClientSession;
  template <class Acceptor>
  boost::asio::awaitable<void> accept_loop(Acceptor& acceptor);
  boost::asio::awaitable<void> serve(wire::Socket socket);
  void check_drained();

  boost::asio::io_context& io_;
  WorkerServices services_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;  // none: the process listens on a unix socket only
  std::optional<boost::asio::local::stream_protocol::acceptor> unix_acceptor_;
  std::unordered_set<ClientConnection*> connections_;
  bool draining_ = false;
  std::function<void()> on_drained_;
};

}  // namespace idem::http
