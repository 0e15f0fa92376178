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

const Route* RouteTable::match(std::string_view method, std::string_view path) const {
  if (path.find(';') != std::string_view::npos) return match(method, without_path_parameters(path));
  for (const Route& route : routes_) {
    if (method_matches(route.match, method) && route_matches_path(route.match, path)) return &route;
  }
  return nullptr;
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
