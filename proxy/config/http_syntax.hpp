#pragma once
// Private to config: the RFC 9110 syntax checks applied to header names and methods.
#include <string>
#include <string_view>

namespace idem::config::detail {

// RFC 9110 §5.6.2 token: 1*tchar. Header field names and methods are tokens.
bool is_http_token(std::string_view text);

bool has_lower_case_letter(std::string_view text);

// Why `url` cannot be problems.docs_url ("" when it can): it must be an absolute http or https
// URL with a host and without a fragment (the problem's slug becomes the fragment), of the
// characters RFC 3986 allows unescaped (it is sent between <> in a Link field).
std::string docs_url_error(std::string_view url);

// ASCII case-insensitive equality (header names compare case-insensitively, RFC 9110 §5.1).
bool iequals(std::string_view a, std::string_view b);

}  // namespace idem::config::detail
