#pragma once
// What http/ is given to serve with, as plain values: app/ translates the parsed configuration
// into these (app/proxy_options.cpp); http/ never reads config/.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/route.hpp"
#include "http/client_limits.hpp"
#include "tls/tls_options.hpp"

namespace idem::http {

// The TCP listener every worker binds (SO_REUSEPORT). No TCP: a unix listener only.
struct ListenOptions {
  bool tcp = true;
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
};

// One upstream's connection pool (http/upstream_pool.hpp).
struct UpstreamOptions {
  std::string name = "default";  // in its log lines
  std::string host = "127.0.0.1";
  std::uint16_t port = 3000;
  std::string socket_path;  // set: a unix socket (host and port unused)
  tls::UpstreamTlsOptions tls;
  std::chrono::milliseconds connect_timeout{1'000};
  std::chrono::milliseconds idle_timeout{4'000};  // pooled keep-alive connection idle lifetime
};

// A configuration snapshot's part http/ reads on every request (http/runtime.hpp).
struct ProxyOptions {
  ListenOptions listen;
  ClientLimits limits;
  bool access_log = true;  // one JSON line per request
  // Each upstream's `timeout`, in the order routes index them (core::RouteForwarding::upstream_index).
  std::vector<std::chrono::milliseconds> upstream_timeouts{std::chrono::seconds(30)};
  std::string problem_docs_url;  // problems.docs_url: what every problem's type points at (core/problem.hpp)
  std::vector<core::Route> routes;
};

}  // namespace idem::http
