#pragma once
// An upstream for tests that answers with exactly the bytes a test scripts, malformed ones
// included (idem-test-upstream, built on Beast, can only send well-formed HTTP). It reads each
// request with Beast's parser, counts it per target (the upstream's own execution counter),
// keeps what it received, and writes the reply scripted for that target, then keeps the
// connection open for the next request or closes it, as scripted.
//
// It can also answer as soon as a request's head is in, without reading its body (as Go's
// net/http does for a body it will not read), and serve HTTPS with the bytes it sends placed in
// TLS records as scripted.
//
// Threads: its own io thread; every public method may be called from any thread.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace idem::test {

class RawUpstream {
 public:
  struct Reply {
    std::string bytes;         // written as they are
    bool close_after = false;  // close the connection once written (after late_bytes, if any)
    std::string late_bytes{};  // written `late_after` after `bytes`, in a write of their own
    std::chrono::milliseconds late_after{0};
    // Sent right behind `bytes` in the same write to the socket; over TLS in a record of its own,
    // so it reaches the peer's TLS layer in one read with the last record of `bytes`.
    std::string trailing_bytes{};
    // Answer (and count the request) once its head is in, without reading its body, then close:
    // the unread body makes the close a reset, which fails the peer's write part-way through.
    bool answer_after_head = false;
  };

  // HTTPS: the certificate chain and key files (PEM).
  struct Tls {
    std::filesystem::path cert_file;
    std::filesystem::path key_file;
  };

  // Listens on 127.0.0.1 (a port the kernel picks). Unscripted targets get a well-formed 200.
  RawUpstream();
  // The same over TLS (1.2 or 1.3, whatever the client offers best).
  explicit RawUpstream(const Tls& tls);
  ~RawUpstream();
  RawUpstream(const RawUpstream&) = delete;
  RawUpstream& operator=(const RawUpstream&) = delete;

  std::uint16_t port() const;
  // The reply to every request whose target (path and query) is `target`.
  void script(std::string target, Reply reply);
  // The reply to the next request for `target` only (queued: each is used once, in order, before
  // the standing script() reply).
  void script_next(std::string target, Reply reply);
  // Requests received for `target` so far (each counted once its whole body arrived, or its head
  // for a reply that answers after the head).
  std::uint64_t executions(std::string_view target) const;
  // Every request received so far, bytes as they came, in order.
  std::string received() const;
  // Connections accepted so far.
  std::uint64_t connections() const;
  // Replies whose late_bytes were written so far.
  std::uint64_t late_writes() const;

 private:
  void start();  // listens and starts the io thread

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::test
