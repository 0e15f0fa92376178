#pragma once
// Private to config: the listen address ("host:port") and the upstream URL ("http://host:port").
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::config::detail {

struct HostPort {
  std::string host;  // IPv6 literals without their brackets: "::1"
  std::uint16_t port = 0;
};

// "127.0.0.1:8080", "localhost:8080", "[::1]:8080". The port is required and 1-65535.
std::optional<HostPort> parse_host_port(std::string_view text);

enum class UrlProblem { none, malformed };

struct UpstreamUrl {
  HostPort address;
  bool https = false;
  std::string socket_path;  // unix:/path
  UrlProblem problem = UrlProblem::none;
};

// "http://host[:port]" or "https://host[:port]", with an optional trailing "/"; the port defaults
// to 80 or 443.
// No user info, path, query or fragment: the proxy forwards request targets unchanged.
// "unix:/path" (or "unix:///path"): a unix socket, its path absolute and short enough for a
// socket address.
UpstreamUrl parse_upstream_url(std::string_view url);

}  // namespace idem::config::detail
