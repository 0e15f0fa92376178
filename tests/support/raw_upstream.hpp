#pragma once
// An upstream for tests that answers with exactly the bytes a test scripts, malformed ones
// included (idem-test-upstream, built on Beast, can only send well-formed HTTP). It reads each
// request with Beast's parser, counts it per target (the upstream's own execution counter),
// keeps what it received, and writes the reply scripted for that target, then keeps the
// connection open for the next request or closes it, as scripted.
//
// Threads: its own io thread; every public method may be called from any thread.
#include <chrono>
#include <cstdint>
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
  };

  // Listens on 127.0.0.1 (a port the kernel picks). Unscripted targets get a well-formed 200.
  RawUpstream();
  ~RawUpstream();
  RawUpstream(const RawUpstream&) = delete;
  RawUpstream& operator=(const RawUpstream&) = delete;

  std::uint16_t port() const;
  // The reply to every request whose target (path and query) is `target`.
  void script(std::string target, Reply reply);
  // The reply to the next request for `target` only (queued: each is used once, in order, before
  // the standing script() reply).
  void script_next(std::string target, Reply reply);
  // Requests received for `target` so far (each counted once its whole body arrived).
  std::uint64_t executions(std::string_view target) const;
  // Every request received so far, bytes as they came, in order.
  std::string received() const;
  // Connections accepted so far.
  std::uint64_t connections() const;
  // Replies whose late_bytes were written so far.
  std::uint64_t late_writes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::test
