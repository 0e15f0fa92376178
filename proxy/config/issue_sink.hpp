#pragma once
// Private to config: collects every problem found while loading, with its position.
#include <string>
#include <vector>

#include <yaml-cpp/mark.h>

#include "config/config_loader.hpp"

namespace idem::config::detail {

class IssueSink {
 public:
  explicit IssueSink(std::string file) : file_(std::move(file)) {}

  void error(const YAML::Mark& at, std::string message) { add(at, std::move(message), false); }
  void warning(const YAML::Mark& at, std::string message) { add(at, std::move(message), true); }
  // For problems that have no place in the text (the file cannot be read).
  void error_without_position(std::string message) { add(YAML::Mark::null_mark(), std::move(message), false); }

  bool has_errors() const;
  // Every issue, in file order (stable: issues at one position keep the order they were found in).
  std::vector<ConfigIssue> take_in_file_order();

 private:
  void add(const YAML::Mark& at, std::string message, bool warning);

  std::string file_;
  std::vector<ConfigIssue> issues_;
};

}  // namespace idem::config::detail
