#include "http/runtime.hpp"

#include <algorithm>

namespace idem::http {

RuntimeConfig::RuntimeConfig(ProxyOptions given, std::shared_ptr<tls::ListenerTls> tls)
    : options(std::move(given)), routes(options.routes), listener_tls(std::move(tls)) {
  largest_request_body = options.limits.max_request_body;
  for (const core::Route& route : options.routes) {
    largest_request_body = std::max(largest_request_body, route.forwarding.max_request_body.value_or(0));
    routes_by_host = routes_by_host || !route.match.host.empty();
  }
}

ForwardingTerms RuntimeConfig::terms_for(const core::Route* route) const {
  const core::RouteForwarding* own = route != nullptr ? &route->forwarding : nullptr;
  ForwardingTerms terms;
  // (A route's index was resolved against these upstreams: they only change with a restart.)
  terms.upstream = own != nullptr && own->upstream_index < options.upstream_timeouts.size() ? own->upstream_index : 0;
  const std::chrono::milliseconds upstream_timeout = terms.upstream < options.upstream_timeouts.size()
                                                         ? options.upstream_timeouts[terms.upstream]
                                                         : std::chrono::milliseconds(30'000);
  terms.timeout = own != nullptr ? own->timeout.value_or(upstream_timeout) : upstream_timeout;
  terms.stream_idle_timeout = own != nullptr ? own->stream_idle_timeout.value_or(terms.timeout) : terms.timeout;
  terms.max_request_body = own != nullptr ? own->max_request_body.value_or(options.limits.max_request_body)
                                          : options.limits.max_request_body;
  return terms;
}

}  // namespace idem::http
