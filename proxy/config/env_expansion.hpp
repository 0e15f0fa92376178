#pragma once
// Private to config: ${VAR} / ${VAR:-default} expansion of scalar values.
#include <string>
#include <string_view>

#include "config/config_loader.hpp"

namespace idem::config::detail {

enum class ExpansionProblem {
  none,
  unknown_variable,  // ${NAME} with NAME unset and no default; `reference` is NAME
  bad_reference,     // "${}" or "${1X}"; `reference` is the text between the braces
  unterminated,      // "${" without its "}"; `reference` is the text after "${"
};

struct Expansion {
  std::string value;  // meaningful only when problem == none
  ExpansionProblem problem = ExpansionProblem::none;
  std::string reference;
};

// Replaces every ${NAME} by the variable's value and every ${NAME:-default} by the value, or by
// `default` when the variable is unset or empty (as the shell does). "$$" is a literal "$"; any
// other "$" is kept as is. NAME is [A-Za-z_][A-Za-z0-9_]*; defaults are literal (not expanded).
Expansion expand_variables(std::string_view text, const EnvLookup& env);

}  // namespace idem::config::detail
