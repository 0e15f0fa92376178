#include "support/raw_upstream.hpp"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

namespace idem::test {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr std::string_view kDefaultReply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// Where the request that starts `buffer` ends, read by Beast's parser (the one the proxy reads
// with), or nullopt while it is incomplete (or not HTTP). Its target is set too.
std::optional<std::size_t> request_end(std::string_view buffer, std::string& target) {
  http::request_parser<http::string_body> parser;
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

}  // namespace

struct RawUpstream::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::set<std::shared_ptr<tcp::socket>> sockets;  // io thread only
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
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;  // closed
      ++connections;
      auto shared = std::make_shared<tcp::socket>(std::move(socket));
      sockets.insert(shared);
      asio::co_spawn(io, serve(shared), asio::detached);
    }
  }

  asio::awaitable<void> serve(std::shared_ptr<tcp::socket> socket) {
    std::string buffer;
    std::array<char, 4096> chunk{};
    for (;;) {
      auto [ec, n] = co_await socket->async_read_some(asio::buffer(chunk), asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      buffer.append(chunk.data(), n);
      std::string target;
      bool close_now = false;
      while (const std::optional<std::size_t> end = request_end(buffer, target)) {
        Reply reply{std::string(kDefaultReply), false};
        {
          const std::lock_guard lock(mutex);
          received.append(buffer, 0, *end);
          ++executions[target];
          if (auto once = next_replies.find(target); once != next_replies.end() && !once->second.empty()) {
            reply = std::move(once->second.front());
            once->second.pop_front();
          } else if (const auto it = replies.find(target); it != replies.end()) {
            reply = it->second;
          }
        }
        buffer.erase(0, *end);
        auto [write_ec, written] = co_await asio::async_write(*socket, asio::buffer(reply.bytes), asio::as_tuple(asio::use_awaitable));
        (void)written;
        if (!write_ec && !reply.late_bytes.empty()) {
          asio::steady_timer timer(io, reply.late_after);
          co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          std::tie(write_ec, written) =
              co_await asio::async_write(*socket, asio::buffer(reply.late_bytes), asio::as_tuple(asio::use_awaitable));
          if (!write_ec) ++late_writes;
        }
        if (write_ec || reply.close_after) {
          close_now = true;
          break;
        }
      }
      if (close_now) break;
    }
    boost::system::error_code ignored;
    socket->shutdown(tcp::socket::shutdown_both, ignored);
    socket->close(ignored);
    sockets.erase(socket);
  }
};

RawUpstream::RawUpstream() : impl_(std::make_unique<Impl>()) {
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
    for (const auto& socket : impl->sockets) socket->close(ignored);
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
