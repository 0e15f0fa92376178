#pragma once
// Request plans: for the n-th request of each connection, which Idempotency-Key to send and what
// the response must be. A plan is shared by every io thread of a phase; each method is called only
// for the caller's own connection index, and per-key state lives in slots one connection owns, so
// no locking is needed.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "verification.hpp"

namespace idem::bench {

class RequestPlan {
 public:
  virtual ~RequestPlan() = default;
  // Fills `key` (empty: no key header) and `expected`; false when the connection has nothing
  // more to send.
  virtual bool next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) = 0;
  // The response to the request last described for this connection passed verification.
  virtual void on_verified(unsigned /*connection*/, std::uint64_t /*sequence*/, const Response& /*response*/) {}
};

// No key: direct, nginx, passthrough.
class PlainPlan final : public RequestPlan {
 public:
  PlainPlan(unsigned status, std::string body) : status_(status), body_(std::move(body)) {}
  bool next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) override;

 private:
  unsigned status_;
  std::string body_;
};

// A key never sent before on every request: "<prefix>-c<connection>-<sequence>".
class UniqueKeyPlan final : public RequestPlan {
 public:
  UniqueKeyPlan(std::string prefix, unsigned status, std::string body)
      : prefix_(std::move(prefix)), status_(status), body_(std::move(body)) {}
  bool next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) override;

 private:
  std::string prefix_;
  unsigned status_;
  std::string body_;
};

std::string replay_key(const std::string& prefix, std::size_t index);

// The warm-up pass of replay:K: sends each of the K keys exactly once (connection c takes keys
// c, c+N, c+2N, ...) as a first request, and keeps the body each one was completed with.
class ReplayCompletionPlan final : public RequestPlan {
 public:
  ReplayCompletionPlan(std::string prefix, std::size_t keys, unsigned connections, unsigned status, std::string body);
  bool next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) override;
  void on_verified(unsigned connection, std::uint64_t sequence, const Response& response) override;

  // The completed bodies, index = key number; nullopt for a key that did not complete.
  std::vector<std::optional<std::string>> take_bodies() { return std::move(bodies_); }

 private:
  std::size_t index_of(unsigned connection, std::uint64_t sequence) const {
    return connection + static_cast<std::size_t>(sequence) * connections_;
  }
  std::string prefix_;
  unsigned connections_;
  unsigned status_;
  std::string body_;
  std::vector<std::optional<std::string>> bodies_;
};

// Every request replays one of the K completed keys; connections start spread over the key set.
class ReplayPlan final : public RequestPlan {
 public:
  ReplayPlan(std::string prefix, std::vector<std::string> bodies, unsigned connections, unsigned status);
  bool next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) override;

 private:
  std::string prefix_;
  std::vector<std::string> bodies_;
  unsigned connections_;
  unsigned status_;
};

}  // namespace idem::bench
