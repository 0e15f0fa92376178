#include "config/addresses.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include "config/http_syntax.hpp"

namespace idem::config::detail {
namespace {

constexpr std::size_t kMaxHostLength = 253;  // RFC 1035 limit on a DNS name

constexpr bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// A DNS name or IPv4 address. Underscores are tolerated: container and service names use them.
bool is_host_name(std::string_view host) {
  if (host.empty() || host.size() > kMaxHostLength) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
  });
}

// The text between the brackets of an IPv6 literal: hex groups, colons, an optional dotted IPv4
// tail. Full validation is left to the resolver; this rejects what cannot be an address at all.
bool is_ipv6_literal(std::string_view host) {
  if (host.size() < 2 || host.find(':') == std::string_view::npos) return false;
  return std::all_of(host.begin(), host.end(), [](char c) { return is_hex_digit(c) || c == ':' || c == '.'; });
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// "host", "host:port", "[v6]" or "[v6]:port"; the port is optional when `default_port` is set.
std::optional<HostPort> parse_authority(std::string_view text, std::optional<std::uint16_t> default_port) {
  std::string_view host;
  std::string_view after_host;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    if (!is_ipv6_literal(host)) return std::nullopt;
    after_host = text.substr(close + 1);
  } else {
    const std::size_t colon = text.find(':');
    host = text.substr(0, colon);
    if (!is_host_name(host)) return std::nullopt;
    after_host = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
  }

  std::optional<std::uint16_t> port = default_port;
  if (!after_host.empty()) {
    if (after_host.front() != ':') return std::nullopt;
    port = parse_port(after_host.substr(1));
  }
  if (!port) return std::nullopt;
  return HostPort{std::string(host), *port};
}

bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && iequals(text.substr(0, prefix.size()), prefix);
}

}  // namespace

std::optional<HostPort> parse_host_port(std::string_view text) { return parse_authority(text, std::nullopt); }

UpstreamUrl parse_upstream_url(std::string_view url) {
  constexpr std::string_view kUnix = "unix:";
  // sockaddr_un's sun_path holds 108 bytes, the terminating NUL included.
  constexpr std::size_t kMaxSocketPath = 107;
  if (starts_with_ignoring_case(url, kUnix)) {
    std::string_view path = url.substr(kUnix.size());
    if (path.starts_with("//")) path.remove_prefix(2);
    if (!path.starts_with('/') || path.size() < 2 || path.size() > kMaxSocketPath ||
        path.find('\0') != std::string_view::npos)
      return UpstreamUrl{.address = {}, .https = false, .socket_path = {}, .problem = UrlProblem::malformed};
    return UpstreamUrl{.address = {}, .https = false, .socket_path = std::string(path), .problem = UrlProblem::none};
  }
  constexpr std::string_view kHttp = "http://";
  constexpr std::string_view kHttps = "https://";
  const bool https = starts_with_ignoring_case(url, kHttps);
  if (!https && !starts_with_ignoring_case(url, kHttp))
    return UpstreamUrl{.address = {}, .https = false, .socket_path = {}, .problem = UrlProblem::malformed};

  std::string_view rest = url.substr(https ? kHttps.size() : kHttp.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  // Anything left that is not host or port (user info, path, query, fragment) is refused.
  if (rest.find_first_of("/?#@") != std::string_view::npos)
    return UpstreamUrl{.address = {}, .https = false, .socket_path = {}, .problem = UrlProblem::malformed};
  std::optional<HostPort> address = parse_authority(rest, static_cast<std::uint16_t>(https ? 443 : 80));
  if (!address) return UpstreamUrl{.address = {}, .https = false, .socket_path = {}, .problem = UrlProblem::malformed};
  return UpstreamUrl{.address = std::move(*address), .https = https, .socket_path = {}, .problem = UrlProblem::none};
}

}  // namespace idem::config::detail
