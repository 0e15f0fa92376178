#pragma once
// Private to config: the RFC 9110 syntax checks applied to header names and methods.
#include <string_view>

namespace idem::config::detail {

// RFC 9110 §5.6.2 token: 1*tchar. Header field names and methods are tokens.
bool is_http_token(std::string_view text);

bool has_lower_case_letter(std::string_view text);

// ASCII case-insensitive equality (header names compare case-insensitively, RFC 9110 §5.1).
bool iequals(std::string_view a, std::string_view b);

}  // namespace idem::config::detail
