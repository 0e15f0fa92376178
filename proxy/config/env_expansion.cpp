#include "config/env_expansion.hpp"

#include <optional>

namespace idem::config::detail {
namespace {

constexpr bool is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
constexpr bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

bool is_variable_name(std::string_view name) {
  if (name.empty() || !is_name_start(name.front())) return false;
  for (char c : name) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

Expansion failure(ExpansionProblem problem, std::string_view reference) {
  return Expansion{.value = {}, .problem = problem, .reference = std::string(reference)};
}

}  // namespace

Expansion expand_variables(std::string_view text, const EnvLookup& env) {
  Expansion result;
  result.value.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c != '$' || (next != '$' && next != '{')) {
      result.value += c;
      ++i;
      continue;
    }
    if (next == '$') {
      result.value += '$';
      i += 2;
      continue;
    }
    const std::size_t body_start = i + 2;
    const std::size_t close = text.find('}', body_start);
    if (close == std::string_view::npos) return failure(ExpansionProblem::unterminated, text.substr(body_start));
    const std::string_view body = text.substr(body_start, close - body_start);
    const std::size_t default_marker = body.find(":-");
    const std::string_view name = body.substr(0, default_marker);
    if (!is_variable_name(name)) return failure(ExpansionProblem::bad_reference, body);

    const std::optional<std::string> value = env(name);
    if (default_marker != std::string_view::npos && (!value || value->empty())) {
      result.value += body.substr(default_marker + 2);
    } else if (value) {
      result.value += *value;
    } else {
      return failure(ExpansionProblem::unknown_variable, name);
    }
    i = close + 1;
  }
  return result;
}

}  // namespace idem::config::detail
