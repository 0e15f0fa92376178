#include "config/issue_sink.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

namespace idem::config::detail {

void IssueSink::add(const YAML::Mark& at, std::string message, bool warning) {
  // yaml-cpp marks are 0-based; a null mark (-1) means "no position".
  const bool positioned = !at.is_null() && at.line >= 0;
  issues_.push_back(ConfigIssue{
      .file = file_,
      .line = positioned ? at.line + 1 : 0,
      .column = positioned ? at.column + 1 : 0,
      .message = std::move(message),
      .warning = warning,
  });
}

bool IssueSink::has_errors() const {
  return std::any_of(issues_.begin(), issues_.end(), [](const ConfigIssue& issue) { return !issue.warning; });
}

std::vector<ConfigIssue> IssueSink::take_in_file_order() {
  std::stable_sort(issues_.begin(), issues_.end(), [](const ConfigIssue& a, const ConfigIssue& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  return std::move(issues_);
}

}  // namespace idem::config::detail
