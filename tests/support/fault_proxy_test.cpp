// The fault proxy itself: it forwards faithfully, and each fault hits exactly the request, reply or
// connection it was armed for, so a failure test that uses it points at the binary, not at it.
#include "support/fault_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/eventually.hpp"
#include "support/ports.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int bound_socket() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address = loopback(0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    throw std::runtime_error(std::string("bind: ") + std::strerror(errno));
  }
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Answers each line "X\n" with "reply:X\n", one thread per connection, and counts what it got.
class LineServer {
 public:
  LineServer() : listen_fd_(bound_socket()) {
    if (::listen(listen_fd_, 64) != 0) throw std::runtime_error("listen failed");
    port_ = local_port(listen_fd_);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~LineServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    acceptor_.join();
    {
      std::lock_guard lock(mutex_);
      for (const int fd : fds_)
        if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& thread : threads_) thread.join();
    ::close(listen_fd_);
  }

  std::uint16_t port() const { return port_; }
  std::size_t requests() const { return requests_.load(); }
  std::size_t bytes() const { return bytes_.load(); }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down
      }
      std::lock_guard lock(mutex_);
      fds_.push_back(fd);
      threads_.emplace_back([this, slot = fds_.size() - 1, fd] { serve(slot, fd); });
    }
  }

  void serve(std::size_t slot, int fd) {
    std::string pending;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      bytes_ += static_cast<std::size_t>(n);
      pending.append(buffer, static_cast<std::size_t>(n));
      for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
        std::string line = pending.substr(0, end);
        pending.erase(0, end + 1);
        {
          std::lock_guard lock(mutex_);
          lines_.push_back(line);
        }
        ++requests_;
        if (!send_all(fd, "reply:" + line + "\n")) break;
      }
    }
    std::lock_guard lock(mutex_);
    ::close(fd);
    fds_[slot] = -1;
  }

  int listen_fd_;
  std::uint16_t port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::vector<int> fds_;  // -1 once closed
  std::vector<std::thread> threads_;
  std::vector<std::string> lines_;
  std::atomic<std::size_t> requests_{0};
  std::atomic<std::size_t> bytes_{0};
};

struct ReadResult {
  std::string data;
  bool closed = false;  // EOF or reset
  bool reset = false;
  bool timed_out = false;
};

// A blocking client connection to 127.0.0.1:port.
class Client {
 public:
  explicit Client(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address = loopback(port);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool send(std::string_view bytes) { return send_all(fd_, bytes); }

  // Reads until a whole line arrived, the peer closed, or timeout passed.
  ReadResult read_line(std::chrono::milliseconds timeout) {
    ReadResult result;
    const auto deadline = Clock::now() + timeout;
    while (result.data.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd watched{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&watched, 1, static_cast<int>(left.count())) == 0) {
        result.timed_out = true;
        return result;
      }
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) {
        result.data.append(buffer, static_cast<std::size_t>(n));
      } else {
        result.closed = true;
        result.reset = n < 0 && errno == ECONNRESET;
        return result;
      }
    }
    return result;
  }

  // One request, its reply line.
  std::string exchange(std::string_view line, std::chrono::milliseconds timeout = 2s) {
    if (!send(line)) return "<send failed>";
    const auto result = read_line(timeout);
    if (result.closed) return "<closed>";
    if (result.timed_out) return "<timed out: " + result.data + ">";
    return result.data;
  }

 private:
  int fd_;
};

using Proxy = FaultProxy;  // below, FaultProxy names the suite's fixture
using AfterLoss = Proxy::AfterLoss;

class FaultProxy : public ::testing::Test {
 protected:
  LineServer server_;
  Proxy proxy_{"127.0.0.1", server_.port()};
};

TEST_F(FaultProxy, ForwardsRequestsAndReplies) {
  ASSERT_NE(proxy_.port(), 0);
  {
    Client client(proxy_.port());
    EXPECT_EQ(client.exchange("a\n"), "reply:a\n");
    EXPECT_EQ(client.exchange("b\n"), "reply:b\n");
    Client other(proxy_.port());
    EXPECT_EQ(other.exchange("c\n"), "reply:c\n");
    EXPECT_EQ(proxy_.connections_accepted(), 2u);
    EXPECT_EQ(proxy_.open_connections(), 2u);
  }
  EXPECT_EQ(server_.requests(), 3u);
  EXPECT_TRUE(eventually([&] { return proxy_.open_connections() == 0; }, 1s));
  EXPECT_EQ(proxy_.faults_fired(), 0u);
  EXPECT_FALSE(proxy_.wait_fired(1, 20ms));
}

TEST_F(FaultProxy, LoseNextReplyWithResetExecutesTheRequestButLosesItsReply) {
  proxy_.lose_next_reply(contains_all({"x"}), AfterLoss::reset);
  Client client(proxy_.port());
  ASSERT_TRUE(client.send("x\n"));
  const auto result = client.read_line(2s);
  EXPECT_TRUE(result.closed);
  EXPECT_EQ(result.data, "");
  EXPECT_EQ(server_.requests(), 1u);  // counted before it replied
  EXPECT_EQ(proxy_.faults_fired(), 1u);

  Client next(proxy_.port());  // one-shot
  EXPECT_EQ(next.exchange("x\n"), "reply:x\n");
  EXPECT_EQ(server_.requests(), 2u);
}

TEST_F(FaultProxy, LoseNextReplyWithHangKeepsTheClientOpenAndSilent) {
  proxy_.lose_next_reply(any_request(), AfterLoss::hang);
  Client client(proxy_.port());
  ASSERT_TRUE(client.send("x\n"));
  ASSERT_TRUE(proxy_.wait_fired(1, 2s));
  EXPECT_EQ(server_.requests(), 1u);
  ASSERT_TRUE(client.send("more\n"));  // read and dropped
  const auto result = client.read_line(300ms);
  EXPECT_TRUE(result.timed_out);
  EXPECT_FALSE(result.closed);
  EXPECT_EQ(result.data, "");
  EXPECT_EQ(proxy_.open_connections(), 1u);
  EXPECT_EQ(server_.requests(), 1u);
}

TEST_F(FaultProxy, DropNextRequestNeverReachesTheServer) {
  proxy_.drop_next_request(contains_all({"x"}), AfterLoss::reset);
  {
    Client client(proxy_.port());
    const auto result = client.send("x\n") ? client.read_line(2s) : ReadResult{};
    EXPECT_TRUE(result.closed);
    EXPECT_EQ(result.data, "");
  }
  EXPECT_EQ(proxy_.faults_fired(), 1u);

  proxy_.drop_next_request(contains_all({"y"}), AfterLoss::hang);
  Client hung(proxy_.port());
  ASSERT_TRUE(hung.send("y\n"));
  EXPECT_TRUE(hung.read_line(300ms).timed_out);
  EXPECT_EQ(proxy_.faults_fired(), 2u);

  Client next(proxy_.port());
  EXPECT_EQ(next.exchange("z\n"), "reply:z\n");
  EXPECT_EQ(server_.lines(), std::vector<std::string>{"z"});
}

TEST_F(FaultProxy, OnlyTheMatchingRequestIsAffected) {
  // Both needles, in one request: a request is what the client sent since the last reply.
  proxy_.lose_next_reply(contains_all({"a1", "b2"}), AfterLoss::reset);
  Client client(proxy_.port());
  EXPECT_EQ(client.exchange("a1\n"), "reply:a1\n");
  EXPECT_EQ(client.exchange("b2\n"), "reply:b2\n");
  ASSERT_TRUE(client.send("a1 "));  // accumulated across reads
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(client.send("b2\n"));
  EXPECT_TRUE(client.read_line(2s).closed);
  EXPECT_EQ(server_.lines(), (std::vector<std::string>{"a1", "b2", "a1 b2"}));
  EXPECT_EQ(proxy_.faults_fired(), 1u);
}

TEST_F(FaultProxy, ArmedFaultsFireOneEachInArmingOrder) {
  proxy_.drop_next_request(contains_all({"q"}), AfterLoss::reset);
  proxy_.lose_next_reply(contains_all({"q"}), AfterLoss::reset);
  Client first(proxy_.port());
  ASSERT_TRUE(first.send("q\n"));
  EXPECT_TRUE(first.read_line(2s).closed);
  EXPECT_EQ(server_.requests(), 0u);  // dropped
  Client second(proxy_.port());
  ASSERT_TRUE(second.send("q\n"));
  EXPECT_TRUE(second.read_line(2s).closed);
  EXPECT_EQ(server_.requests(), 1u);  // executed, reply lost
  Client third(proxy_.port());
  EXPECT_EQ(third.exchange("q\n"), "reply:q\n");
  EXPECT_EQ(proxy_.faults_fired(), 2u);
}

TEST_F(FaultProxy, BlackholeSilencesOpenAndNewConnectionsUntilTurnedOff) {
  Client before(proxy_.port());
  EXPECT_EQ(before.exchange("a\n"), "reply:a\n");
  proxy_.set_blackhole(true);
  Client during(proxy_.port());
  ASSERT_TRUE(before.send("b\n"));
  ASSERT_TRUE(during.send("c\n"));
  EXPECT_TRUE(before.read_line(300ms).timed_out);
  EXPECT_TRUE(during.read_line(50ms).timed_out);
  EXPECT_EQ(server_.requests(), 1u);

  proxy_.set_blackhole(false);
  Client after(proxy_.port());
  EXPECT_EQ(after.exchange("d\n"), "reply:d\n");
  ASSERT_TRUE(during.send("e\n"));  // blackholed connections stay dead
  EXPECT_EQ(during.read_line(100ms).data, "");
  EXPECT_EQ(server_.lines(), (std::vector<std::string>{"a", "d"}));
}

TEST_F(FaultProxy, ReplyDelayHoldsEveryReply) {
  proxy_.set_reply_delay(250ms);
  Client client(proxy_.port());
  const auto started = Clock::now();
  EXPECT_EQ(client.exchange("a\n"), "reply:a\n");
  EXPECT_GE(Clock::now() - started, 250ms);
  proxy_.set_reply_delay(0ms);
  EXPECT_EQ(client.exchange("b\n"), "reply:b\n");
}

TEST_F(FaultProxy, DelayNextReplyHoldsOnlyTheMatchingRequestsReply) {
  proxy_.delay_next_reply(contains_all({"slow"}), 400ms);
  Client client(proxy_.port());
  EXPECT_EQ(client.exchange("fast\n"), "reply:fast\n");
  EXPECT_EQ(proxy_.faults_fired(), 0u);
  ASSERT_TRUE(client.send("slow\n"));
  EXPECT_TRUE(client.read_line(200ms).timed_out) << "the reply came before its delay";
  EXPECT_TRUE(proxy_.wait_fired(1, 0ms)) << "fired when the held reply arrived";
  EXPECT_EQ(client.read_line(2s).data, "reply:slow\n") << "the late reply arrives on the same connection";
  const auto started = Clock::now();
  EXPECT_EQ(client.exchange("after\n"), "reply:after\n");
  EXPECT_LT(Clock::now() - started, 200ms) << "only one reply is held";
  EXPECT_EQ(server_.requests(), 3u);
}

TEST_F(FaultProxy, ResetNextConnectionAfterForwardsThatManyBytesThenResets) {
  proxy_.reset_next_connection_after(5);
  Client client(proxy_.port());
  EXPECT_EQ(client.exchange("ab\n"), "reply:ab\n");  // 3 bytes
  ASSERT_TRUE(client.send("cdef\n"));                // 2 more forwarded, then reset
  EXPECT_TRUE(client.read_line(2s).closed);
  EXPECT_TRUE(proxy_.wait_fired(1, 1s));
  EXPECT_TRUE(eventually([&] { return server_.bytes() == 5; }, 1s)) << server_.bytes();
  EXPECT_EQ(server_.requests(), 1u);

  Client next(proxy_.port());  // one-shot
  EXPECT_EQ(next.exchange("0123456789\n"), "reply:0123456789\n");
}

TEST_F(FaultProxy, RefusingResetsNewConnectionsOnly) {
  Client open(proxy_.port());
  EXPECT_EQ(open.exchange("a\n"), "reply:a\n");
  proxy_.set_refusing(true);
  {
    Client refused(proxy_.port());
    refused.send("b\n");  // may fail already: the reset can come first
    const auto result = refused.read_line(2s);
    EXPECT_TRUE(result.closed);
    EXPECT_EQ(result.data, "");
  }
  EXPECT_EQ(open.exchange("c\n"), "reply:c\n");
  EXPECT_EQ(proxy_.connections_accepted(), 2u);
  EXPECT_EQ(proxy_.open_connections(), 1u);
  proxy_.set_refusing(false);
  Client later(proxy_.port());
  EXPECT_EQ(later.exchange("d\n"), "reply:d\n");
  EXPECT_EQ(server_.lines(), (std::vector<std::string>{"a", "c", "d"}));
}

TEST_F(FaultProxy, ResetAllResetsEveryOpenConnection) {
  Client first(proxy_.port());
  Client second(proxy_.port());
  EXPECT_EQ(first.exchange("a\n"), "reply:a\n");
  EXPECT_EQ(second.exchange("b\n"), "reply:b\n");
  proxy_.reset_all();
  EXPECT_EQ(proxy_.open_connections(), 0u);
  const auto result = first.read_line(1s);
  EXPECT_TRUE(result.closed);
  EXPECT_TRUE(result.reset);
  EXPECT_TRUE(second.read_line(1s).closed);
  Client next(proxy_.port());
  EXPECT_EQ(next.exchange("c\n"), "reply:c\n");
}

TEST_F(FaultProxy, ATargetThatRefusesResetsTheClient) {
  const int unlistened = bound_socket();  // bound, never listening: connects are refused
  {
    Proxy proxy("127.0.0.1", local_port(unlistened));
    Client client(proxy.port());
    EXPECT_TRUE(client.read_line(2s).closed);
    EXPECT_TRUE(eventually([&] { return proxy.open_connections() == 0; }, 1s));
  }
  ::close(unlistened);
}

TEST_F(FaultProxy, DestructionClosesConnectionsInEveryState) {
  LineServer server;
  auto proxy = std::make_unique<Proxy>("localhost", server.port());
  Client normal(proxy->port());
  EXPECT_EQ(normal.exchange("a\n"), "reply:a\n");
  proxy->lose_next_reply(contains_all({"hang"}), AfterLoss::hang);
  Client hung(proxy->port());
  ASSERT_TRUE(hung.send("hang\n"));
  ASSERT_TRUE(proxy->wait_fired(1, 2s));
  proxy->set_reply_delay(10s);
  Client delayed(proxy->port());
  ASSERT_TRUE(delayed.send("slow\n"));
  ASSERT_TRUE(eventually([&] { return server.requests() == 3; }, 1s));
  proxy.reset();
  EXPECT_TRUE(normal.read_line(1s).closed);
  EXPECT_TRUE(hung.read_line(1s).closed);
  const auto result = delayed.read_line(1s);
  EXPECT_TRUE(result.closed);
  EXPECT_EQ(result.data, "");
}

TEST_F(FaultProxy, ContainsAllIsBinarySafe) {
  const auto matches = contains_all({std::string("a\0b", 3), "\xff"});
  EXPECT_TRUE(matches(std::string_view("xa\0b\xff", 5)));
  EXPECT_FALSE(matches(std::string_view("xa\0c\xff", 5)));
  EXPECT_FALSE(matches("ab\xff"));
  EXPECT_TRUE(contains_all({})(""));
  EXPECT_TRUE(any_request()(""));
}

}  // namespace
}  // namespace idem::test
