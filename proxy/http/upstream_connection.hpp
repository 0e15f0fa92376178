#pragma once
// One connection to the upstream, as the pool keeps it and as it lends it to a streamed exchange
// (http/streamed_forwarding.hpp). An UpstreamLease owns a lent connection: given back to the pool
// only after a response that leaves it in a known state, closed otherwise (a body cut short, a
// client gone mid-body: bytes may still be on their way, which would be read as the next answer).
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "wire/client_stream.hpp"
#include "wire/response_head.hpp"

namespace idem::http {

class Upstream;

// TCP, and TLS over it for an https upstream, with the buffer its responses are read through
// (kept across exchanges: its storage is allocated once).
struct UpstreamTransport : wire::ClientStream {
  using ClientStream::ClientStream;
  boost::beast::flat_buffer buffer;
};

// Counts an open connection for as long as it lives, so every exit path gives its slot back.
class ConnectionTicket {
 public:
  explicit ConnectionTicket(std::size_t* open) : open_(open) { ++*open_; }
  ConnectionTicket(ConnectionTicket&& other) noexcept : open_(std::exchange(other.open_, nullptr)) {}
  ConnectionTicket& operator=(ConnectionTicket&& other) noexcept {
    if (this != &other) {
      release();
      open_ = std::exchange(other.open_, nullptr);
    }
    return *this;
  }
  ~ConnectionTicket() { release(); }

 private:
  void release() {
    if (open_) --*open_;
    open_ = nullptr;
  }
  std::size_t* open_;
};

struct UpstreamConnection {
  std::unique_ptr<UpstreamTransport> transport;  // on the heap: the TLS layer refers to the TCP stream
  ConnectionTicket ticket;
  std::chrono::steady_clock::time_point idle_since{};
};

// A connection lent by Upstream::acquire. Closed when the lease ends, unless given back.
class UpstreamLease {
 public:
  UpstreamLease() = default;
  UpstreamLease(Upstream& owner, UpstreamConnection connection, bool reused)
      : owner_(&owner), connection_(std::move(connection)), reused_(reused) {}
  // (A moved-from optional stays engaged: the moves below empty it.)
  UpstreamLease(UpstreamLease&& other) noexcept
      : owner_(other.owner_), connection_(std::move(other.connection_)), reused_(other.reused_) {
    other.connection_.reset();
  }
  UpstreamLease& operator=(UpstreamLease&& other) noexcept {
    if (this != &other) {
      close();
      owner_ = other.owner_;
      connection_ = std::move(other.connection_);
      other.connection_.reset();
      reused_ = other.reused_;
    }
    return *this;
  }
  ~UpstreamLease() { close(); }

  bool held() const { return connection_.has_value(); }
  UpstreamTransport& transport() { return *connection_->transport; }
  // Taken from the pool (it may have been closed by the upstream meanwhile), not opened for this.
  bool reused() const { return reused_; }
  // Back to the pool for the next exchange: the response was read to its end, nothing past it.
  void give_back();
  // Closes the connection now (pending operations on it fail).
  void close() {
    if (connection_) connection_->transport->close();
    connection_.reset();
  }

 private:
  Upstream* owner_ = nullptr;
  std::optional<UpstreamConnection> connection_;
  bool reused_ = false;
};

// The rest of an answer whose body goes on past what the exchange keeps (UpstreamResult::rest):
// its connection, and its parser in the middle of the body, for the client connection to stream
// (http/streamed_forwarding.hpp). The head and the body's first bytes are in the result's response.
struct OpenResponse {
  UpstreamLease lease;
  std::optional<wire::StreamedResponseParser> parser;  // emplaced in place: a parser cannot move
  std::string transfer_codings;  // every Transfer-Encoding line of the head, joined (the response has none left)
  bool reusable = false;         // the connection may serve another exchange once the body is read to its end
};

}  // namespace idem::http
