#include "http/runtime.hpp"

#include <algorithm>

namespace idem::http {

RuntimeConfig::RuntimeConfig(config::Config loaded, std::shared_ptr<tls::ListenerTls> tls)
    : config(std::move(loaded)),
      routes(config.routes),
      listener_tls(std::move(tls)),
      problem_docs_url(config.problems.docs_url) {
  largest_request_body = config.limits.max_request_body;
  for (const core::Route& route : config.routes) {
    largest_request_body = std::max(largest_request_body, route.forwarding.max_request_body.value_or(0));
    routes_by_host = routes_by_host || !route.match.host.empty();
  }
}

ForwardingTerms RuntimeConfig::terms_for(const core::Route* route) const {
  const core::RouteForwarding* own = route != nullptr ? &route->forwarding : nullptr;
  ForwardingTerms terms;
  // (A route's index was resolved against these upstreams: they only change with a restart.)
  terms.upstream = own != nullptr && own->upstream_index < config.upstreams.size() ? own->upstream_index : 0;
  const config::UpstreamConfig& upstream = config.upstreams[terms.upstream];
  terms.timeout = own != nullptr ? own->timeout.value_or(upstream.timeout) : upstream.timeout;
  terms.stream_idle_timeout = own != nullptr ? own->stream_idle_timeout.value_or(terms.timeout) : terms.timeout;
  terms.max_request_body =
      own != nullptr ? own->max_request_body.value_or(config.limits.max_request_body) : config.limits.max_request_body;
  return terms;
}

}  // namespace idem::http
