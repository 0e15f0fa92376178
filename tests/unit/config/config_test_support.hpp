#pragma once
// Helpers shared by the config tests: a fake environment and issue lookup.
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "config/config_loader.hpp"

namespace idem::config::test {

inline EnvLookup fake_env(std::map<std::string, std::string, std::less<>> variables = {}) {
  return [variables = std::move(variables)](std::string_view name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

inline LoadResult load(std::string_view yaml, const EnvLookup& env = fake_env()) {
  return load_config_text(yaml, "test.yaml", env);
}

inline std::string all_issues(const LoadResult& result) {
  std::string text;
  for (const ConfigIssue& issue : result.issues) text += issue.to_string() + "\n";
  return text;
}

}  // namespace idem::config::test
