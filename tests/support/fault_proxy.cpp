#include "support/fault_proxy.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <cassert>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace idem::test {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxRequestBytes = std::size_t{1} << 20;      // kept for matching
constexpr std::size_t kMaxQueuedReplyBytes = std::size_t{4} << 20;  // server reads pause above this
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::chrono::seconds kConnectTimeout{5};

void close_socket(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.close(ignored);
}

void reset_socket(tcp::socket& socket) {
  if (!socket.is_open()) return;
  boost::system::error_code ignored;
  socket.set_option(asio::socket_base::linger(true, 0), ignored);
  socket.close(ignored);
}

}  // namespace

// Everything but the counters and port is owned by the io thread; the public methods reach it
// through run_on_io.
struct FaultProxy::Impl {
  class Connection;

  struct ArmedFault {
    enum class Kind { lose_reply, drop_request, delay_reply };
    Kind kind;
    Matcher matches;
    AfterLoss after = AfterLoss::reset;
    std::chrono::milliseconds delay{0};  // delay_reply
  };

  Impl(const std::string& target_host, std::uint16_t target_port);

  // Runs f on the io thread and returns once it ran (directly when already there).
  template <class F>
  void run_on_io(F&& f) {
    if (io.get_executor().running_in_this_thread()) {
      f();
      return;
    }
    std::promise<void> done;
    auto finished = done.get_future();
    asio::post(io, [&] {
      f();
      done.set_value();
    });
    finished.get();
  }

  void accept();
  void on_accept(const boost::system::error_code& ec, tcp::socket socket);
  // The first armed fault that matches `request`, removed from the list.
  std::optional<ArmedFault> take_matching_fault(std::string_view request);
  void note_fired();
  void forget(std::uint64_t id);  // a connection closed
  void for_each_connection(const std::function<void(Connection&)>& action);

  // io thread only.
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::vector<tcp::endpoint> target;
  std::map<std::uint64_t, std::weak_ptr<Connection>> connections;
  std::uint64_t next_id = 0;
  std::deque<ArmedFault> faults;
  bool blackhole = false;
  bool refusing = false;
  bool stopping = false;
  std::chrono::milliseconds reply_delay{0};
  std::optional<std::size_t> reset_next_after;

  // Any thread.
  std::uint16_t port = 0;
  std::atomic<std::size_t> accepted{0};
  std::atomic<std::size_t> open{0};
  mutable std::mutex fired_mutex;
  mutable std::condition_variable fired_changed;
  std::size_t fired = 0;  // guarded by fired_mutex
  mutable std::mutex forwarded_mutex;
  std::string forwarded;  // guarded by forwarded_mutex: client->server bytes as written

  std::thread thread;
};

// One accepted client and its server side. Lives on the io thread only; every handler holds a
// shared_ptr to it. Client->server is a pump (read a chunk, write it, read again); server->client
// goes through a queue so that replies can be delayed without reordering.
class FaultProxy::Impl::Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class State {
    connecting,  // connecting to the target; the client is not read yet
    normal,      // forwarding both ways
    swallowing,  // a lose_next_reply fault matched: forwarding up, waiting to lose the reply
    hung,        // client read and dropped, never written; server side closed
    blackholed,  // client and server read and dropped, nothing written
    dead,        // both sides closed
  };

  Connection(Impl& proxy, std::uint64_t id, tcp::socket client, std::optional<std::size_t> reset_after)
      : proxy_(proxy), id_(id), client_(std::move(client)), server_(proxy.io), deadline_(proxy.io),
        reply_timer_(proxy.io), reset_after_(reset_after) {}

  void start(bool blackholed) {
    if (blackholed) {
      state_ = State::blackholed;
      read_client();
      return;
    }
    if (reset_after_ == std::size_t{0}) {
      proxy_.note_fired();
      reset();
      return;
    }
    state_ = State::connecting;
    deadline_.expires_after(kConnectTimeout);
    deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && self->state_ == State::connecting) close_socket(self->server_);
    });
    asio::async_connect(server_, proxy_.target,
                        [self = shared_from_this()](const boost::system::error_code& ec, const tcp::endpoint&) {
                          self->on_connected(ec);
                        });
  }

  void blackhole() {
    switch (state_) {
      case State::dead:
      case State::hung:
      case State::blackholed:
        return;
      case State::connecting:
        state_ = State::blackholed;  // on_connected starts the draining
        return;
      case State::normal:
      case State::swallowing:
        state_ = State::blackholed;
        drop_replies();
        if (server_paused_) {
          server_paused_ = false;
          read_server();
        }
        return;
    }
  }

  // Both sides RST.
  void reset() {
    if (state_ == State::dead) return;
    reset_socket(client_);
    reset_socket(server_);
    finish();
  }

  // Both sides closed (FIN).
  void close() {
    if (state_ == State::dead) return;
    close_socket(client_);
    close_socket(server_);
    finish();
  }

 private:
  struct Chunk {
    Clock::time_point due;
    std::string data;
    bool eof = false;  // the server finished sending: shut the client's receiving side
  };

  void finish() {
    state_ = State::dead;
    deadline_.cancel();
    reply_timer_.cancel();
    out_.clear();
    out_bytes_ = 0;
    proxy_.forget(id_);
  }

  void drop_replies() {
    out_.clear();
    out_bytes_ = 0;
    reply_timer_.cancel();
  }

  void on_connected(const boost::system::error_code& ec) {
    deadline_.cancel();
    switch (state_) {
      case State::dead:
        return;
      case State::blackholed:
        close_socket(server_);
        read_client();
        return;
      case State::connecting:
        if (ec) {  // refused, unreachable or past the deadline: as the target would look
          reset();
          return;
        }
        state_ = State::normal;
        read_client();
        read_server();
        return;
      case State::normal:
      case State::swallowing:
      case State::hung:
        assert(false && "connect completed twice");
        return;
    }
  }

  // The client after a fired fault: reset, or hung. The server side is closed either way.
  void lose_client(AfterLoss after) {
    switch (after) {
      case AfterLoss::reset:
        close_socket(server_);
        reset_socket(client_);
        finish();
        return;
      case AfterLoss::hang:
        state_ = State::hung;
        close_socket(server_);
        drop_replies();
        return;
    }
  }

  void read_client() {
    client_.async_read_some(asio::buffer(client_buf_),
                            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                              self->on_client_read(ec, n);
                            });
  }

  void on_client_read(const boost::system::error_code& ec, std::size_t n) {
    if (state_ == State::dead) return;
    if (ec) {
      if (ec == asio::error::eof)
        on_client_eof();
      else
        reset();
      return;
    }
    switch (state_) {
      case State::dead:
        return;
      case State::connecting:
        assert(false && "client read before the target connected");
        return;
      case State::hung:
      case State::blackholed:
        read_client();
        return;
      case State::normal:
      case State::swallowing:
        forward_up(n);
        return;
    }
  }

  void on_client_eof() {
    switch (state_) {
      case State::dead:
        return;
      case State::connecting:
        assert(false && "client read before the target connected");
        return;
      case State::hung:
      case State::blackholed:
        close();
        return;
      case State::normal:
      case State::swallowing: {
        client_eof_ = true;
        boost::system::error_code ignored;
        server_.shutdown(tcp::socket::shutdown_send, ignored);
        if (client_shut_) close();
        return;
      }
    }
  }

  void forward_up(std::size_t n) {
    if (state_ == State::normal) {
      const std::size_t room = kMaxRequestBytes - std::min(kMaxRequestBytes, request_.size());
      request_.append(client_buf_.data(), std::min(n, room));
      if (auto fault = proxy_.take_matching_fault(request_)) {
        switch (fault->kind) {
          case ArmedFault::Kind::lose_reply:
            state_ = State::swallowing;
            after_loss_ = fault->after;
            break;  // forwarded below; fires when the reply comes
          case ArmedFault::Kind::drop_request:
            proxy_.note_fired();
            lose_client(fault->after);
            if (state_ == State::hung) read_client();
            return;
          case ArmedFault::Kind::delay_reply:
            next_reply_delay_ = fault->delay;
            break;  // forwarded below; the reply's first chunk is held
        }
      }
    }
    std::size_t count = n;
    bool reset_when_written = false;
    if (reset_after_) {
      const std::size_t remaining = *reset_after_ - forwarded_;
      if (n >= remaining) {
        count = remaining;
        reset_when_written = true;
      }
    }
    forwarded_ += count;
    {
      const std::lock_guard lock(proxy_.forwarded_mutex);
      proxy_.forwarded.append(client_buf_.data(), count);
    }
    asio::async_write(server_, asio::buffer(client_buf_.data(), count),
                      [self = shared_from_this(), reset_when_written](const boost::system::error_code& ec,
                                                                      std::size_t) {
                        self->on_server_written(ec, reset_when_written);
                      });
  }

  void on_server_written(const boost::system::error_code& ec, bool reset_now) {
    switch (state_) {
      case State::dead:
        return;
      case State::connecting:
        assert(false && "server written before it connected");
        return;
      case State::hung:
      case State::blackholed:
        read_client();  // keep draining the client
        return;
      case State::normal:
      case State::swallowing:
        if (ec) {
          reset();
        } else if (reset_now) {
          proxy_.note_fired();
          reset();
        } else {
          read_client();
        }
        return;
    }
  }

  void read_server() {
    server_.async_read_some(asio::buffer(server_buf_),
                            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                              self->on_server_read(ec, n);
                            });
  }

  void on_server_read(const boost::system::error_code& ec, std::size_t n) {
    switch (state_) {
      case State::dead:
      case State::hung:  // server side already closed
        return;
      case State::connecting:
        assert(false && "server read before it connected");
        return;
      case State::blackholed:
        if (ec)
          close_socket(server_);
        else
          read_server();
        return;
      case State::swallowing:
        // The reply (or the server's close instead of one) is lost. When hung, the pending client
        // read or server write (if the client still sends) carries on draining the client.
        proxy_.note_fired();
        lose_client(after_loss_);
        return;
      case State::normal:
        break;
    }
    if (ec) {
      if (ec != asio::error::eof) {
        reset();
        return;
      }
      out_.push_back(Chunk{due_now(), {}, true});
      pump_down();
      return;
    }
    request_.clear();
    out_.push_back(Chunk{due_now(), std::string(server_buf_.data(), n), false});
    out_bytes_ += n;
    pump_down();
    if (out_bytes_ < kMaxQueuedReplyBytes)
      read_server();
    else
      server_paused_ = true;
  }

  // When a chunk that arrives from the server now may be written to the client.
  Clock::time_point due_now() {
    const auto held = std::exchange(next_reply_delay_, std::nullopt);
    if (held) proxy_.note_fired();
    return Clock::now() + proxy_.reply_delay + held.value_or(std::chrono::milliseconds{0});
  }

  // Writes the queue's head to the client once it is due; one write or wait at a time.
  void pump_down() {
    if (writing_ || out_.empty()) return;
    if (out_.front().due > Clock::now()) {
      writing_ = true;
      reply_timer_.expires_at(out_.front().due);
      reply_timer_.async_wait([self = shared_from_this()](const boost::system::error_code&) {
        self->writing_ = false;
        if (self->state_ == State::normal || self->state_ == State::swallowing) self->pump_down();
      });
      return;
    }
    Chunk chunk = std::move(out_.front());
    out_.pop_front();
    if (chunk.eof) {
      boost::system::error_code ignored;
      client_.shutdown(tcp::socket::shutdown_send, ignored);
      client_shut_ = true;
      if (client_eof_) close();
      return;
    }
    out_bytes_ -= chunk.data.size();
    in_flight_ = std::move(chunk.data);  // a member: drop_replies() may clear the queue meanwhile
    writing_ = true;
    asio::async_write(client_, asio::buffer(in_flight_),
                      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                        self->on_client_written(ec);
                      });
  }

  void on_client_written(const boost::system::error_code& ec) {
    writing_ = false;
    switch (state_) {
      case State::dead:
      case State::hung:
      case State::blackholed:
        return;
      case State::connecting:
        assert(false && "client written before the target connected");
        return;
      case State::normal:
      case State::swallowing:
        if (ec) {
          reset();
          return;
        }
        if (server_paused_ && out_bytes_ < kMaxQueuedReplyBytes) {
          server_paused_ = false;
          read_server();
        }
        pump_down();
        return;
    }
  }

  Impl& proxy_;
  const std::uint64_t id_;
  tcp::socket client_;
  tcp::socket server_;
  asio::steady_timer deadline_;     // the connect to the target
  asio::steady_timer reply_timer_;  // the queue's head is not due yet
  State state_ = State::connecting;
  AfterLoss after_loss_ = AfterLoss::reset;  // swallowing: what losing the reply does

  std::array<char, kReadChunk> client_buf_{};
  std::array<char, kReadChunk> server_buf_{};
  std::string request_;  // client bytes since the server last sent, at most kMaxRequestBytes
  std::optional<std::size_t> reset_after_;
  std::size_t forwarded_ = 0;  // client->server bytes written
  std::optional<std::chrono::milliseconds> next_reply_delay_;  // delay_next_reply matched here

  std::deque<Chunk> out_;  // server->client, in order
  std::size_t out_bytes_ = 0;
  std::string in_flight_;
  bool writing_ = false;        // a client write or a wait for the head's due time is pending
  bool server_paused_ = false;  // too much queued: server reads resume as the queue drains
  bool client_eof_ = false;     // the client finished sending (the server's side was shut down)
  bool client_shut_ = false;    // the server finished sending (the client's side was shut down)
};

FaultProxy::Impl::Impl(const std::string& target_host, std::uint16_t target_port) {
  tcp::resolver resolver(io);
  for (const auto& entry : resolver.resolve(target_host, std::to_string(target_port)))
    target.push_back(entry.endpoint());
  if (target.empty()) throw std::runtime_error("FaultProxy: " + target_host + " does not resolve");
  const tcp::endpoint listen(asio::ip::address_v4::loopback(), 0);
  acceptor.open(listen.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(listen);
  acceptor.listen();
  port = acceptor.local_endpoint().port();
}

void FaultProxy::Impl::accept() {
  acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void FaultProxy::Impl::on_accept(const boost::system::error_code& ec, tcp::socket socket) {
  if (stopping || ec == asio::error::operation_aborted) return;
  if (ec) {  // out of descriptors, say: try again shortly rather than spin
    accept_retry.expires_after(std::chrono::milliseconds(10));
    accept_retry.async_wait([this](const boost::system::error_code& wait_ec) {
      if (!wait_ec && !stopping) accept();
    });
    return;
  }
  ++accepted;
  if (refusing) {
    reset_socket(socket);
  } else {
    const std::uint64_t id = next_id++;
    auto connection = std::make_shared<Connection>(*this, id, std::move(socket), std::exchange(reset_next_after, {}));
    connections.emplace(id, connection);
    ++open;
    connection->start(blackhole);
  }
  accept();
}

std::optional<FaultProxy::Impl::ArmedFault> FaultProxy::Impl::take_matching_fault(std::string_view request) {
  for (auto it = faults.begin(); it != faults.end(); ++it) {
    bool hit = false;
    try {
      hit = it->matches(request);
    } catch (...) {
      hit = false;
    }
    if (hit) {
      ArmedFault fault = std::move(*it);
      faults.erase(it);
      return fault;
    }
  }
  return std::nullopt;
}

void FaultProxy::Impl::note_fired() {
  {
    std::lock_guard lock(fired_mutex);
    ++fired;
  }
  fired_changed.notify_all();
}

void FaultProxy::Impl::forget(std::uint64_t id) {
  if (connections.erase(id) != 0) --open;
}

void FaultProxy::Impl::for_each_connection(const std::function<void(Connection&)>& action) {
  std::vector<std::shared_ptr<Connection>> alive;  // action may remove entries from the map
  for (const auto& [id, weak] : connections)
    if (auto connection = weak.lock()) alive.push_back(std::move(connection));
  for (const auto& connection : alive) action(*connection);
}

FaultProxy::FaultProxy(const std::string& target_host, std::uint16_t target_port)
    : impl_(std::make_unique<Impl>(target_host, target_port)) {
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

FaultProxy::~FaultProxy() {
  try {
    impl_->run_on_io([impl = impl_.get()] {
      impl->stopping = true;
      boost::system::error_code ignored;
      impl->acceptor.close(ignored);
      impl->accept_retry.cancel();
      impl->for_each_connection([](Impl::Connection& connection) { connection.close(); });
    });
  } catch (...) {
    impl_->io.stop();  // could not even post: handlers left are destroyed with the io_context
  }
  // Every socket and timer is closed or cancelled: run() returns once their handlers have run.
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t FaultProxy::port() const { return impl_->port; }

void FaultProxy::lose_next_reply(Matcher matches, AfterLoss after) {
  impl_->run_on_io([&] {
    impl_->faults.push_back(Impl::ArmedFault{Impl::ArmedFault::Kind::lose_reply, std::move(matches), after});
  });
}

void FaultProxy::drop_next_request(Matcher matches, AfterLoss after) {
  impl_->run_on_io([&] {
    impl_->faults.push_back(Impl::ArmedFault{Impl::ArmedFault::Kind::drop_request, std::move(matches), after});
  });
}

void FaultProxy::delay_next_reply(Matcher matches, std::chrono::milliseconds delay) {
  impl_->run_on_io([&] {
    impl_->faults.push_back(
        Impl::ArmedFault{Impl::ArmedFault::Kind::delay_reply, std::move(matches), AfterLoss::reset, delay});
  });
}

std::size_t FaultProxy::faults_fired() const {
  std::lock_guard lock(impl_->fired_mutex);
  return impl_->fired;
}

bool FaultProxy::wait_fired(std::size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->fired_mutex);
  return impl_->fired_changed.wait_for(lock, timeout, [&] { return impl_->fired >= count; });
}

void FaultProxy::set_blackhole(bool on) {
  impl_->run_on_io([&] {
    impl_->blackhole = on;
    if (on) impl_->for_each_connection([](Impl::Connection& connection) { connection.blackhole(); });
  });
}

void FaultProxy::set_reply_delay(std::chrono::milliseconds delay) {
  impl_->run_on_io([&] { impl_->reply_delay = delay; });
}

void FaultProxy::reset_next_connection_after(std::size_t bytes) {
  impl_->run_on_io([&] { impl_->reset_next_after = bytes; });
}

void FaultProxy::reset_all() {
  impl_->run_on_io([&] { impl_->for_each_connection([](Impl::Connection& connection) { connection.reset(); }); });
}

void FaultProxy::set_refusing(bool on) {
  impl_->run_on_io([&] { impl_->refusing = on; });
}

std::string FaultProxy::forwarded_to_server() const {
  const std::lock_guard lock(impl_->forwarded_mutex);
  return impl_->forwarded;
}

void FaultProxy::clear_forwarded() {
  const std::lock_guard lock(impl_->forwarded_mutex);
  impl_->forwarded.clear();
}

std::size_t FaultProxy::connections_accepted() const { return impl_->accepted.load(); }

std::size_t FaultProxy::open_connections() const { return impl_->open.load(); }

FaultProxy::Matcher contains_all(std::vector<std::string> needles) {
  return [needles = std::move(needles)](std::string_view request) {
    for (const auto& needle : needles)
      if (request.find(needle) == std::string_view::npos) return false;
    return true;
  };
}

FaultProxy::Matcher any_request() {
  return [](std::string_view) { return true; };
}

}  // namespace idem::test
