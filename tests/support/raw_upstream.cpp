#include "support/raw_upstream.hpp"

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>

namespace idem::test {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

constexpr std::string_view kDefaultReply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// Where the request that starts `buffer` ends, read by Beast's parser (the one the proxy reads
// with), or nullopt while it is incomplete (or not HTTP). Its target is set too.
std::optional<std::size_t> request_end(std::string_view buffer, std::string& target) {
  http::request_parser<http::string_body> parser;
  parser.body_limit(boost::none);  // any body a test sends
  parser.eager(true);
  std::size_t used = 0;
  while (!parser.is_done() && used < buffer.size()) {
    boost::system::error_code ec;
    const std::size_t n = parser.put(asio::buffer(buffer.data() + used, buffer.size() - used), ec);
    if (ec && ec != http::error::need_more) return std::nullopt;
    if (n == 0) break;
    used += n;
  }
  if (!parser.is_done()) return std::nullopt;
  target = std::string(parser.get().target());
  return used;
}

// Where the head of the request that starts `buffer` ends, or nullopt while it is incomplete (or
// not HTTP). Its target is set too.
std::optional<std::size_t> head_end(std::string_view buffer, std::string& target) {
  http::request_parser<http::string_body> parser;  // not eager: put() stops at the end of the head
  parser.body_limit(boost::none);                   // else a length past 1 MB fails the head
  boost::system::error_code ec;
  const std::size_t used = parser.put(asio::buffer(buffer.data(), buffer.size()), ec);
  if (ec || !parser.is_header_done()) return std::nullopt;
  target = std::string(parser.get().target());
  return used;
}

// One accepted connection: TCP, and TLS over it for an HTTPS upstream.
struct Peer {
  Peer(tcp::socket accepted, ssl::context* tls_context) : socket(std::move(accepted)) {
    if (tls_context != nullptr) tls.emplace(socket, *tls_context);
  }
  Peer(const Peer&) = delete;  // the TLS layer refers to `socket`
  Peer& operator=(const Peer&) = delete;

  asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> read_some(asio::mutable_buffer into) {
    if (tls) co_return co_await tls->async_read_some(into, use_tuple);
    co_return co_await socket.async_read_some(into, use_tuple);
  }

  // `bytes`, then `trailing` in the same socket write (see Reply::trailing_bytes).
  asio::awaitable<boost::system::error_code> write(std::string_view bytes, std::string_view trailing = {}) {
    if (!tls) {
      const std::array<asio::const_buffer, 2> both{asio::buffer(bytes), asio::buffer(trailing)};
      auto [ec, written] = co_await asio::async_write(socket, both, use_tuple);
      co_return ec;
    }
    if (!trailing.empty()) {
      // Into the TLS engine as records of their own, not sent yet: the write of `trailing` below
      // takes everything the engine holds to the socket in one write (both fit its 17 KB buffer).
      // (A longer script fails its write: its test sees the connection closed.)
      if (bytes.size() + trailing.size() > 16 * 1024) co_return asio::error::message_size;
      if (SSL_write(tls->native_handle(), bytes.data(), static_cast<int>(bytes.size())) !=
          static_cast<int>(bytes.size())) {
        co_return asio::error::fault;
      }
      bytes = trailing;
    }
    auto [ec, written] = co_await asio::async_write(*tls, asio::buffer(bytes), use_tuple);
    co_return ec;
  }

  tcp::socket socket;
  std::optional<ssl::stream<tcp::socket&>> tls;
};

}  // namespace

struct RawUpstream::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::optional<ssl::context> tls;
  std::set<std::shared_ptr<Peer>> peers;  // io thread only
  std::thread thread;
  std::uint16_t port = 0;

  mutable std::mutex mutex;  // guards what follows
  std::map<std::string, Reply, std::less<>> replies;
  std::map<std::string, std::deque<Reply>, std::less<>> next_replies;
  std::map<std::string, std::uint64_t, std::less<>> executions;
  std::string received;
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> late_writes{0};

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec) co_return;  // closed
      ++connections;
      auto peer = std::make_shared<Peer>(std::move(socket), tls ? &*tls : nullptr);
      peers.insert(peer);
      asio::co_spawn(io, serve(peer), asio::detached);
    }
  }

  // Whether the next request for `target` is answered once its head is in.
  bool answers_after_head(std::string_view target) const {
    const std::lock_guard lock(mutex);
    if (const auto once = next_replies.find(target); once != next_replies.end() && !once->second.empty())
      return once->second.front().answer_after_head;
    const auto it = replies.find(target);
    return it != replies.end() && it->second.answer_after_head;
  }

  // Counts a request for `target` (its bytes as received) and hands out its reply.
  Reply take_reply(std::string_view target, std::string_view request) {
    Reply reply{std::string(kDefaultReply), false};
    const std::lock_guard lock(mutex);
    received.append(request);
    ++executions[std::string(target)];
    if (auto once = next_replies.find(target); once != next_replies.end() && !once->second.empty()) {
      reply = std::move(once->second.front());
      once->second.pop_front();
    } else if (const auto it = replies.find(target); it != replies.end()) {
      reply = it->second;
    }
    return reply;
  }

  asio::awaitable<void> serve(std::shared_ptr<Peer> peer) {
    if (peer->tls) {
      auto [ec] = co_await peer->tls->async_handshake(ssl::stream_base::server, use_tuple);
      if (ec) {
        close(peer);
        co_return;
      }
    }
    std::string buffer;
    std::array<char, 4096> chunk{};
    for (bool open = true; open;) {
      auto [ec, n] = co_await peer->read_some(asio::buffer(chunk));
      if (ec) break;
      buffer.append(chunk.data(), n);
      for (;;) {
        std::string target;
        const std::optional<std::size_t> head = head_end(buffer, target);
        if (!head) break;
        if (answers_after_head(target)) {
          // The body stays unread: closing on it resets the connection.
          const Reply reply = take_reply(target, std::string_view(buffer).substr(0, *head));
          co_await peer->write(reply.bytes);
          open = false;
          break;
        }
        const std::optional<std::size_t> end = request_end(buffer, target);
        if (!end) break;
        const Reply reply = take_reply(target, std::string_view(buffer).substr(0, *end));
        buffer.erase(0, *end);
        boost::system::error_code write_ec = co_await peer->write(reply.bytes, reply.trailing_bytes);
        if (!write_ec && !reply.late_bytes.empty()) {
          asio::steady_timer timer(io, reply.late_after);
          co_await timer.async_wait(use_tuple);
          write_ec = co_await peer->write(reply.late_bytes);
          if (!write_ec) ++late_writes;
        }
        if (write_ec || reply.close_after) {
          open = false;
          break;
        }
      }
    }
    close(peer);
  }

  void close(const std::shared_ptr<Peer>& peer) {
    boost::system::error_code ignored;
    peer->socket.shutdown(tcp::socket::shutdown_both, ignored);
    peer->socket.close(ignored);
    peers.erase(peer);
  }
};

RawUpstream::RawUpstream() : impl_(std::make_unique<Impl>()) { start(); }

RawUpstream::RawUpstream(const Tls& tls) : impl_(std::make_unique<Impl>()) {
  ssl::context context(ssl::context::tls_server);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
  context.use_certificate_chain_file(tls.cert_file.string());
  context.use_private_key_file(tls.key_file.string(), ssl::context::pem);
  impl_->tls.emplace(std::move(context));
  start();
}

void RawUpstream::start() {
  const tcp::endpoint loopback(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(loopback.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(loopback);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

RawUpstream::~RawUpstream() {
  std::promise<void> closed;
  asio::post(impl_->io, [impl = impl_.get(), &closed] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
    for (const auto& peer : impl->peers) peer->socket.close(ignored);
    closed.set_value();
  });
  closed.get_future().wait();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t RawUpstream::port() const { return impl_->port; }

void RawUpstream::script(std::string target, Reply reply) {
  const std::lock_guard lock(impl_->mutex);
  impl_->replies[std::move(target)] = std::move(reply);
}

void RawUpstream::script_next(std::string target, Reply reply) {
  const std::lock_guard lock(impl_->mutex);
  impl_->next_replies[std::move(target)].push_back(std::move(reply));
}

std::uint64_t RawUpstream::executions(std::string_view target) const {
  const std::lock_guard lock(impl_->mutex);
  const auto it = impl_->executions.find(target);
  return it == impl_->executions.end() ? 0 : it->second;
}

std::string RawUpstream::received() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->received;
}

std::uint64_t RawUpstream::connections() const { return impl_->connections.load(); }

std::uint64_t RawUpstream::late_writes() const { return impl_->late_writes.load(); }

}  // namespace idem::test
