#include "config/http_syntax.hpp"

#include <algorithm>
#include <optional>

namespace idem::config::detail {
namespace {

constexpr bool is_tchar(char c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return true;
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return kSymbols.find(c) != std::string_view::npos;
}

constexpr char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

bool is_http_token(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_tchar); }

bool has_lower_case_letter(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return to_lower(x) == to_lower(y); });
}

std::string docs_url_error(std::string_view url) {
  std::optional<std::string_view> rest;  // after the scheme
  for (const std::string_view scheme : {"https://", "http://"}) {
    if (url.size() >= scheme.size() && iequals(url.substr(0, scheme.size()), scheme)) rest = url.substr(scheme.size());
  }
  if (!rest) return "expected an absolute http:// or https:// URL, e.g. https://docs.example.com/errors";
  if (rest->empty() || rest->front() == '/' || rest->front() == '?') return "the URL has no host";
  if (url.find('#') != std::string_view::npos) {
    return "the URL has a fragment (#...): each problem's slug is appended as the fragment";
  }
  // RFC 3986 unreserved, reserved and '%': what a URI holds without escaping.
  constexpr std::string_view kUriSymbols = "-._~:/?[]@!$&'()*+,;=%";
  const auto bad = std::find_if(url.begin(), url.end(), [&](char c) {
    const bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    return !alnum && kUriSymbols.find(c) == std::string_view::npos;
  });
  if (bad != url.end()) {
    return "the URL holds a character a URI must percent-encode (spaces, quotes, <, >, non-ASCII...)";
  }
  return "";
}

}  // namespace idem::config::detail
