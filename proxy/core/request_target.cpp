#include "core/request_target.hpp"

#include <algorithm>
#include <vector>

#include "core/ascii.hpp"

namespace idem::core {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_unreserved(char c) {
  return ascii::is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' || c == '_' ||
         c == '~';
}

TargetResult refused(std::string_view why) { return {std::nullopt, bad_request_problem(why)}; }

// RFC 3986 §5.2.4 on a path whose percent-encodings are already normalized, with empty segments
// ("//") dropped: "/a//b/./c/../d/" -> "/a/b/d/".
std::string without_dot_segments(std::string_view path) {
  std::vector<std::string_view> kept;
  bool trailing_slash = false;
  while (!path.empty()) {
    path.remove_prefix(1);  // the '/' before this segment
    const std::size_t slash = path.find('/');
    const std::string_view segment = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
    const bool last = path.empty();
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
      trailing_slash = last;
    } else if (segment == "." || segment.empty()) {
      trailing_slash = last;
    } else {
      kept.push_back(segment);
      trailing_slash = false;
    }
  }
  std::string out;
  for (const std::string_view segment : kept) out.append("/").append(segment);
  if (out.empty() || trailing_slash) out.push_back('/');
  return out;
}

// What most targets are already: an absolute path with no percent-encoding, backslash, NUL, empty
// segment or segment starting with a dot. Normalizing it returns it unchanged, so it is not rebuilt.
bool is_plainly_normal(std::string_view path) {
  if (!path.starts_with('/')) return false;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '%' || c == '\\' || c == '\0') return false;
    if (c == '/' && i + 1 < path.size() && (path[i + 1] == '/' || path[i + 1] == '.')) return false;
  }
  return true;
}

// A segment whose name before its `;` parameters is `.` or `..`, or empty anywhere but last: a
// dot segment or `//` to servers that drop parameters, a name to the others (see the header).
bool has_ambiguous_parameters(std::string_view path) {
  if (path.find(';') == std::string_view::npos) return false;
  while (!path.empty()) {
    path.remove_prefix(1);  // the '/' before this segment
    const std::size_t slash = path.find('/');
    const std::string_view segment = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
    const std::size_t semicolon = segment.find(';');
    if (semicolon == std::string_view::npos) continue;
    const std::string_view name = segment.substr(0, semicolon);
    if (name == "." || name == ".." || (name.empty() && !path.empty())) return true;
  }
  return false;
}

TargetResult with_path_checked(NormalizedTarget result, std::size_t path_length) {
  if (has_ambiguous_parameters(std::string_view(result.target).substr(0, path_length))) {
    return refused(
        "the request path holds a '.', '..' or empty segment with ';' parameters, which servers read "
        "differently");
  }
  return {std::move(result), std::nullopt};
}

}  // namespace

std::string without_path_parameters(std::string_view path) {
  std::string bare;
  bare.reserve(path.size());
  std::size_t at = 0;
  while (at < path.size()) {
    const std::size_t semicolon = path.find(';', at);
    bare.append(path.substr(at, semicolon - at));
    if (semicolon == std::string_view::npos) break;
    at = path.find('/', semicolon);  // the parameters end with their segment
  }
  return bare;
}

bool is_valid_host_port(std::string_view host) {
  if (host.empty()) return false;
  std::string_view port;
  if (host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (const char c : host.substr(1, close - 1)) {
      if (!(ascii::is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
        return false;
    }
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    port = rest.empty() ? rest : rest.substr(1);
    if (!rest.empty() && port.empty()) return false;
  } else {
    const std::size_t colon = host.find(':');
    const std::string_view name = host.substr(0, colon);
    if (name.empty()) return false;
    for (const char c : name) {
      const bool unreserved = ascii::is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
                              c == '.' || c == '_' || c == '~';
      const bool sub_delim = c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' || c == '*' ||
                             c == '+' || c == ';' || c == '=';
      if (!unreserved && !sub_delim && c != '%') return false;
    }
    if (colon != std::string_view::npos) {
      port = host.substr(colon + 1);
      if (port.empty()) return false;
    }
  }
  if (port.size() > 5) return false;
  for (const char c : port) {
    if (!ascii::is_digit(c)) return false;
  }
  return true;
}

std::string scope_host(std::string_view host) {
  // A bracketed IP literal holds ':' of its own: the port is what follows ']'.
  const std::size_t name_end = host.starts_with('[') ? host.find(']') + 1 : host.find(':');
  std::string name(host.substr(0, std::min(name_end, host.size())));
  for (char& c : name) c = ascii::to_lower(c);
  if (name.size() > 1 && name.back() == '.') name.pop_back();
  return name;
}

TargetResult normalize_request_target(std::string_view target, std::string_view method) {
  if (target == "*") {
    if (method == "OPTIONS") return {NormalizedTarget{"*", std::nullopt}, std::nullopt};
    return refused("the request target * is for OPTIONS only");
  }
  NormalizedTarget result;
  std::string_view rest = target;
  if (!rest.starts_with('/')) {
    // absolute-form (RFC 9112 §3.2.2): the authority becomes the Host, the rest the target.
    const std::size_t scheme_end = rest.find("://");
    const std::string_view scheme = rest.substr(0, scheme_end);
    if (scheme_end == std::string_view::npos || !(ascii::iequals(scheme, "http") || ascii::iequals(scheme, "https"))) {
      return refused("the request target must be an absolute path, or an absolute http or https URI");
    }
    rest.remove_prefix(scheme_end + 3);
    const std::size_t authority_end = rest.find_first_of("/?#");
    const std::string_view authority = rest.substr(0, authority_end);
    if (authority.empty() || !is_valid_host_port(authority))
      return refused("the request target's authority is not host[:port]");
    result.authority = std::string(authority);
    rest = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  }
  if (rest.find('#') != std::string_view::npos) return refused("the request target carries a fragment");
  const std::size_t question = rest.find('?');
  const std::string_view raw_path = rest.substr(0, question);
  const std::string_view query = question == std::string_view::npos ? std::string_view() : rest.substr(question);

  if (is_plainly_normal(raw_path)) {
    result.target.assign(rest);
    return with_path_checked(std::move(result), raw_path.size());
  }
  std::string path;
  path.reserve(raw_path.size() + 1);
  if (!raw_path.starts_with('/')) path.push_back('/');  // "http://svc" or "http://svc?x"
  for (std::size_t i = 0; i < raw_path.size(); ++i) {
    const char c = raw_path[i];
    if (c == '\\' || c == '\0') return refused("the request path holds a backslash or NUL");
    if (c != '%') {
      path.push_back(c);
      continue;
    }
    const int high = i + 2 < raw_path.size() ? hex_value(raw_path[i + 1]) : -1;
    const int low = i + 2 < raw_path.size() ? hex_value(raw_path[i + 2]) : -1;
    if (high < 0 || low < 0) return refused("the request path holds a malformed percent-encoding");
    const char decoded = static_cast<char>(high * 16 + low);
    if (decoded == '/' || decoded == '\\' || decoded == '\0') {
      return refused("the request path holds an encoded '/', '\\' or NUL, which cannot be normalized safely");
    }
    if (is_unreserved(decoded)) {
      path.push_back(decoded);
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      path.push_back('%');
      path.push_back(kHex[high]);
      path.push_back(kHex[low]);
    }
    i += 2;
  }
  result.target = without_dot_segments(path);
  const std::size_t path_length = result.target.size();
  result.target.append(query);
  return with_path_checked(std::move(result), path_length);
}

}  // namespace idem::core
