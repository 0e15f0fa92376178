#pragma once
// A TCP proxy for tests that injects faults deterministically, not by timing luck. A test puts it
// between one of our binaries and a dependency (Postgres, Redis, an HTTP upstream), points the
// binary at port(), arms a fault, and lets the binary run into it.
//
// Every protocol it carries is request/response, so on each connection a "request" is: every byte
// the client sent since the server last sent bytes (accumulated across TCP reads; the first 1 MiB
// is kept for matching, later bytes are forwarded unseen). The request is cleared when server
// bytes arrive from the server (with a reply delay set, that is before they reach the client).
//
// Threads: the proxy runs its own io thread. Every public method may be called from any other
// thread (the test's). The setters and fault arms return only once the io thread has applied them,
// so a fault armed before a request is sent applies to it. Matchers run on the io thread; they must
// not throw (a throw counts as "no match") and must not call back into the FaultProxy.
//
// Reset means RST (SO_LINGER {1, 0}, then close). Reads carry no deadline (pooled connections sit
// idle for as long as they like); the connect to the target has a 5 s deadline.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace idem::test {

class FaultProxy {
 public:
  // Called on the io thread with the request bytes so far.
  using Matcher = std::function<bool(std::string_view request)>;
  // What a one-shot fault does to the client connection once it fires (the server side is closed
  // either way): reset it, or hang it (kept open and silent: its bytes are read and dropped,
  // nothing is ever written to it again, until the client closes or the proxy is destroyed).
  enum class AfterLoss { reset, hang };

  // Listens on 127.0.0.1 (port chosen by the kernel) and forwards each accepted connection to
  // target_host:target_port (resolved here, once). Throws std::runtime_error (or
  // boost::system::system_error) when the target does not resolve or the listener cannot be set up.
  FaultProxy(const std::string& target_host, std::uint16_t target_port);
  // Closes the listener and every connection (both sides), then joins the io thread.
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::uint16_t port() const;

  // One-shot faults. Armed faults wait in arming order; each fires on exactly one request on one
  // connection (the first one it matches, checked as client bytes arrive); a request fires at most
  // one fault, and a connection at most one in its life.
  //
  // The matching request is forwarded whole to the server (bytes the client sends after the match
  // are forwarded too); the server's reply is swallowed; when its first bytes arrive (or the server
  // closes instead), the fault fires: the client is reset or hung and the server side closed.
  void lose_next_reply(Matcher matches, AfterLoss after);
  // The matching request is not forwarded (bytes of it forwarded by earlier reads, before it
  // matched, stay forwarded; the server side is closed, so such a request is never completed):
  // the fault fires at once, the client is reset or hung and the server side closed. A request
  // certainly not executed.
  void drop_next_request(Matcher matches, AfterLoss after);
  // The matching request is forwarded; the first bytes of its reply (or the server's close) reach
  // the client `delay` after they arrived (plus any set_reply_delay), and everything the server
  // sends after them waits behind them: one slow answer, the connection otherwise untouched, so
  // a client that gave up at its deadline sees the late reply arrive on the same connection.
  void delay_next_reply(Matcher matches, std::chrono::milliseconds delay);

  // Faults that have fired so far: lose_next_reply at the loss, drop_next_request at the drop,
  // delay_next_reply when the held reply arrives from the server, reset_next_connection_after at
  // its reset.
  std::size_t faults_fired() const;
  // True as soon as faults_fired() >= count; false when it still is not at the timeout.
  bool wait_fired(std::size_t count, std::chrono::milliseconds timeout) const;

  // While on: every open connection and every new one is blackholed, i.e. its client bytes are
  // read and dropped, server bytes are dropped, nothing is answered (new connections are accepted
  // but never connected to the target). Off: new connections work again; blackholed ones stay
  // dead until their client closes them (a lose_next_reply that had matched on one never fires).
  void set_blackhole(bool on);
  // Every server->client chunk is written `delay` after it arrived from the server (order kept
  // per connection). 0 = off. Applies to chunks that arrive after the call.
  void set_reply_delay(std::chrono::milliseconds delay);
  // One-shot per call: the next connection accepted forwards `bytes` client->server bytes in total
  // and is then reset on both sides (0: reset at once, never connected to the target).
  void reset_next_connection_after(std::size_t bytes);
  // Resets every open connection now, both sides (hung and blackholed ones too).
  void reset_all();
  // While on, new connections are accepted and reset at once (as a down server looks: connect
  // succeeds, the first read fails). Open connections are unaffected.
  void set_refusing(bool on);

  // Connections accepted since construction, refused ones included.
  // Every byte written to the server so far, on every connection, in the order written: what the
  // dependency received (a capture of the exact bytes a binary sent through the proxy).
  std::string forwarded_to_server() const;
  void clear_forwarded();

  std::size_t connections_accepted() const;
  // Connections not yet closed (hung and blackholed ones count; refused ones never do).
  std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when every needle occurs in the request bytes (binary safe; no needles: always true).
FaultProxy::Matcher contains_all(std::vector<std::string> needles);
// Matches every request.
FaultProxy::Matcher any_request();

}  // namespace idem::test
