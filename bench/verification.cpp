#include "verification.hpp"

#include <boost/beast/core/string.hpp>

#include "bench_protocol.hpp"

namespace idem::bench {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::connect_failed: return "connect_failed";
    case ErrorKind::write_failed: return "write_failed";
    case ErrorKind::read_failed: return "read_failed";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::bad_status: return "bad_status";
    case ErrorKind::replay_header_missing: return "replay_header_missing";
    case ErrorKind::replay_header_unexpected: return "replay_header_unexpected";
    case ErrorKind::body_mismatch: return "body_mismatch";
    case ErrorKind::storm_no_execution: return "storm_no_execution";
    case ErrorKind::storm_multiple_executions: return "storm_multiple_executions";
    case ErrorKind::storm_replay_mismatch: return "storm_replay_mismatch";
    case ErrorKind::execution_count_mismatch: return "execution_count_mismatch";
    case ErrorKind::count_probe_failed: return "count_probe_failed";
    case ErrorKind::warmup_failed: return "warmup_failed";
  }
  return "unknown";
}

std::uint64_t ErrorCounts::total() const {
  std::uint64_t sum = 0;
  for (auto n : counts_) sum += n;
  return sum;
}

void ErrorCounts::merge(const ErrorCounts& other) {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

bool is_replay(const Response& response) {
  const auto it = response.find(kReplayHeader);
  return it != response.end() && boost::beast::iequals(it->value(), "true");
}

std::optional<ErrorKind> check_response(const Response& response, const Expectation& expected) {
  if (response.result_int() != expected.status) return ErrorKind::bad_status;
  const bool replayed = is_replay(response);
  switch (expected.replay) {
    case ReplayExpectation::absent:
      if (replayed) return ErrorKind::replay_header_unexpected;
      break;
    case ReplayExpectation::present:
      if (!replayed) return ErrorKind::replay_header_missing;
      break;
  }
  if (response.body() != expected.body) return ErrorKind::body_mismatch;
  return std::nullopt;
}

void PhaseStats::merge(const PhaseStats& other) {
  latency.merge(other.latency);
  errors.merge(other.errors);
  for (std::size_t i = 0; i < statuses.size(); ++i) statuses[i] += other.statuses[i];
  responses += other.responses;
  verified += other.verified;
  connects += other.connects;
}

}  // namespace idem::bench
