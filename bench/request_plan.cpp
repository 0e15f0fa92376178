#include "request_plan.hpp"

namespace idem::bench {

bool PlainPlan::next(unsigned, std::uint64_t, std::string& key, Expectation& expected) {
  key.clear();
  expected = Expectation{status_, ReplayExpectation::absent, body_};
  return true;
}

bool UniqueKeyPlan::next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) {
  key.assign(prefix_);
  key += "-c";
  key += std::to_string(connection);
  key += '-';
  key += std::to_string(sequence);
  expected = Expectation{status_, ReplayExpectation::absent, body_};
  return true;
}

std::string replay_key(const std::string& prefix, std::size_t index) { return prefix + "-r" + std::to_string(index); }

ReplayCompletionPlan::ReplayCompletionPlan(std::string prefix, std::size_t keys, unsigned connections, unsigned status,
                                           std::string body)
    : prefix_(std::move(prefix)), connections_(connections), status_(status), body_(std::move(body)), bodies_(keys) {}

bool ReplayCompletionPlan::next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) {
  const std::size_t index = index_of(connection, sequence);
  if (index >= bodies_.size()) return false;
  key = replay_key(prefix_, index);
  expected = Expectation{status_, ReplayExpectation::absent, body_};
  return true;
}

void ReplayCompletionPlan::on_verified(unsigned connection, std::uint64_t sequence, const Response& response) {
  const std::size_t index = index_of(connection, sequence);
  if (index < bodies_.size()) bodies_[index] = response.body();
}

ReplayPlan::ReplayPlan(std::string prefix, std::vector<std::string> bodies, unsigned connections, unsigned status)
    : prefix_(std::move(prefix)), bodies_(std::move(bodies)), connections_(connections), status_(status) {}

bool ReplayPlan::next(unsigned connection, std::uint64_t sequence, std::string& key, Expectation& expected) {
  const std::size_t keys = bodies_.size();
  const std::size_t start = static_cast<std::size_t>(connection) * keys / connections_;
  const std::size_t index = (start + static_cast<std::size_t>(sequence % keys)) % keys;
  key.assign(prefix_);
  key += "-r";
  key += std::to_string(index);
  expected = Expectation{status_, ReplayExpectation::present, bodies_[index]};
  return true;
}

}  // namespace idem::bench
