#pragma once
// What a response must be, the ways it can fail to be that, and the per-phase tallies.
#include <array>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "histogram.hpp"

namespace idem::bench {

using Response = boost::beast::http::response<boost::beast::http::string_body>;

enum class ErrorKind {
  connect_failed,
  write_failed,
  read_failed,   // connection closed or broken before a complete response
  timeout,       // connect or request exceeded --timeout
  bad_status,
  replay_header_missing,     // a replay expected, `Idempotent-Replay: true` absent
  replay_header_unexpected,  // a first/plain response carried it
  body_mismatch,
  storm_no_execution,         // a storm round with no non-replay 200
  storm_multiple_executions,  // a storm round with more than one
  storm_replay_mismatch,      // a storm 200 whose body differs from the round's first 200
  execution_count_mismatch,   // the upstream's count moved by other than expected
  count_probe_failed,         // the upstream's count could not be read
  warmup_failed,              // the replay keys could not all be completed
};
inline constexpr std::size_t kErrorKindCount = static_cast<std::size_t>(ErrorKind::warmup_failed) + 1;
std::string_view error_kind_name(ErrorKind kind);

class ErrorCounts {
 public:
  void add(ErrorKind kind, std::uint64_t n = 1) { counts_[static_cast<std::size_t>(kind)] += n; }
  std::uint64_t count(ErrorKind kind) const { return counts_[static_cast<std::size_t>(kind)]; }
  std::uint64_t total() const;
  void merge(const ErrorCounts& other);

 private:
  std::array<std::uint64_t, kErrorKindCount> counts_{};
};

enum class ReplayExpectation { absent, present };

struct Expectation {
  unsigned status = 200;
  ReplayExpectation replay = ReplayExpectation::absent;
  std::string_view body;  // must outlive the request it describes
};

bool is_replay(const Response& response);
// nullopt: the response is what was expected.
std::optional<ErrorKind> check_response(const Response& response, const Expectation& expected);

// Everything one thread counts during one phase; merged across threads at the end.
struct PhaseStats {
  LatencyHistogram latency;  // verified responses only
  ErrorCounts errors;
  std::array<std::uint64_t, 600> statuses{};  // responses by status code (599 also counts above)
  std::uint64_t responses = 0;                 // complete responses received, verified or not
  std::uint64_t verified = 0;
  std::uint64_t connects = 0;

  void count_status(unsigned status) { ++statuses[status < statuses.size() ? status : statuses.size() - 1]; }
  void merge(const PhaseStats& other);
};

}  // namespace idem::bench
