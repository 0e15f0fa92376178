#pragma once
// Plain reverse proxying (no idempotency handling) and the proxy's answer when the upstream fails.
#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "http/message.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"
#include "http/upstream_pool.hpp"

namespace idem::http {

boost::asio::awaitable<Response> forward_plain(WorkerServices& services, Request& request,
                                               std::string_view client_address, RequestTrace& trace);

// 502 unreachable / TLS handshake failed / bad response, 503 pool exhausted, 504 timeout, as
// problem+json.
Response upstream_failure_response(UpstreamFailure failure, unsigned version);

}  // namespace idem::http
