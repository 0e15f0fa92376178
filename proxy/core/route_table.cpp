#include "core/route_table.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "core/ascii.hpp"
#include "core/request_target.hpp"

namespace idem::core {
namespace {

// Walks the '/'-separated segments after the leading '/': "/a/b/" yields "a", "b", "" and "/"
// yields one empty segment. A trailing slash is therefore a segment of its own, so `/orders`
// and `/orders/` are different paths.
class Segments {
 public:
  explicit Segments(std::string_view path) : rest_(path.substr(1)) {}

  bool done() const { return done_; }

  std::string_view next() {
    const std::size_t slash = rest_.find('/');
    if (slash == std::string_view::npos) {
      done_ = true;
      return rest_;
    }
    const std::string_view segment = rest_.substr(0, slash);
    rest_.remove_prefix(slash + 1);
    return segment;
  }

 private:
  std::string_view rest_;
  bool done_ = false;
};

constexpr std::string_view kWildcard = "*";

constexpr bool is_param_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool is_param_segment(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}' &&
         std::all_of(segment.begin() + 1, segment.end() - 1, is_param_name_char);
}

std::string segment_error(std::string_view segment, std::string_view problem) {
  return "path segment '" + std::string(segment) + "' " + std::string(problem);
}

bool method_matches(const RouteMatch& match, std::string_view method) {
  return match.methods.empty() || std::find(match.methods.begin(), match.methods.end(), method) != match.methods.end();
}

}  // namespace

RouteTable::RouteTable(std::vector<Route> routes) : routes_(std::move(routes)) {}

const Route* RouteTable::match(std::string_view method, std::string_view path, std::string_view host) const {
  if (path.find(';') != std::string_view::npos) return match(method, without_path_parameters(path), host);
  for (const Route& route : routes_) {
    if (method_matches(route.match, method) && host_matches(route.match.host, host) &&
        route_matches_path(route.match, path))
      return &route;
  }
  return nullptr;
}

namespace {
// The name part of a Host value: without its port, and without the brackets of an IPv6 literal's.
std::string_view host_name_of(std::string_view host) {
  if (host.starts_with('[')) {
    const std::size_t close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  const std::size_t colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

constexpr std::string_view kAnySubdomain = "*.";
}  // namespace

bool host_matches(std::string_view pattern, std::string_view host) {
  if (pattern.empty()) return true;
  std::string_view name = host_name_of(host);
  // "example.com." is the same name, fully qualified.
  if (name.size() > 1 && name.back() == '.') name.remove_suffix(1);
  if (pattern.starts_with(kAnySubdomain)) {
    const std::string_view parent = pattern.substr(1);  // ".example.com"
    return name.size() > parent.size() && ascii::iequals(name.substr(name.size() - parent.size()), parent);
  }
  return ascii::iequals(name, pattern);
}

std::string host_pattern_error(std::string_view pattern) {
  std::string_view name = pattern.starts_with(kAnySubdomain) ? pattern.substr(kAnySubdomain.size()) : pattern;
  if (name.empty()) return "a host name is required (e.g. api.example.com or *.example.com)";
  if (name.starts_with('[') && name.ends_with(']')) return {};  // an IPv6 literal
  for (const char c : name) {
    const bool allowed =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    if (!allowed) {
      return c == ':' ? "a host is matched without its port: leave the port out"
                      : "'" + std::string(1, c) + "' is not allowed: a host name, an IPv6 literal in [], or *.name";
    }
  }
  if (name.find('*') != std::string_view::npos || name.starts_with('.') || name.find("..") != std::string_view::npos)
    return "not a host name";
  return {};
}

std::string lower_ascii(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = ascii::to_lower(c);
  return lower;
}

bool route_matches_path(const RouteMatch& match, std::string_view path) {
  if (path_matches(match.path, path, match.case_insensitive)) return true;
  // "/orders/" is "/orders"; "/" stays "/" (it has no segment to drop a slash from).
  return match.trailing_slash && path.size() > 1 && path.back() == '/' &&
         path_matches(match.path, path.substr(0, path.size() - 1), match.case_insensitive);
}

bool path_matches(std::string_view pattern, std::string_view path, bool case_insensitive) {
  if (pattern.empty() || pattern.front() != '/' || path.empty() || path.front() != '/') return false;
  Segments pattern_segments(pattern);
  Segments path_segments(path);
  while (!pattern_segments.done()) {
    const std::string_view expected = pattern_segments.next();
    if (expected == kWildcard && pattern_segments.done()) return true;  // the rest, even nothing
    if (path_segments.done()) return false;
    const std::string_view actual = path_segments.next();
    const bool segment_matches = is_param_segment(expected) ? !actual.empty()
                                 : case_insensitive         ? ascii::iequals(expected, actual)
                                                            : expected == actual;
    if (!segment_matches) return false;
  }
  return path_segments.done();
}

std::string path_pattern_error(std::string_view pattern) {
  if (pattern.empty() || pattern.front() != '/') return "path pattern must start with '/'";
  if (pattern.find_first_of("?#") != std::string_view::npos) {
    return "path pattern must not contain '?' or '#': the query string is never matched";
  }
  if (pattern.find(';') != std::string_view::npos) {
    return "path pattern must not contain ';': a segment's ';' parameters are never matched";
  }
  Segments segments(pattern);
  while (!segments.done()) {
    const std::string_view segment = segments.next();
    const bool last = segments.done();
    if (segment.empty()) {
      if (!last) return "path pattern must not contain an empty segment ('//')";
    } else if (segment.find_first_of("{}") != std::string_view::npos) {
      if (!is_param_segment(segment)) {
        return segment_error(segment, "is not a valid parameter: use a whole segment {name} of letters, digits or '_'");
      }
    } else if (segment.find('*') != std::string_view::npos) {
      if (segment != kWildcard || !last) {
        return segment_error(segment, "is not allowed: '*' may only be the whole last segment");
      }
    }
  }
  return {};
}

}  // namespace idem::core
