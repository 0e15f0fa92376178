#include "http/proxying.hpp"

#include "core/problem.hpp"
#include "http/forwarding.hpp"

namespace idem::http {
namespace asio = boost::asio;

Response upstream_failure_response(UpstreamFailure failure, unsigned version) {
  switch (failure) {
    case UpstreamFailure::none: break;
    case UpstreamFailure::connect_failed:
      return problem_response(core::upstream_unreachable_problem("the upstream refused or did not accept the connection"), version);
    case UpstreamFailure::pool_exhausted: return problem_response(core::upstream_connections_busy_problem(), version);
    case UpstreamFailure::tls_failed: return problem_response(core::upstream_tls_failed_problem(), version);
    case UpstreamFailure::timeout: return problem_response(core::upstream_timeout_problem(), version);
    case UpstreamFailure::connection_lost:
      return problem_response(core::upstream_bad_response_problem("the upstream closed the connection without a complete response"), version);
    case UpstreamFailure::bad_response:
      return problem_response(core::upstream_bad_response_problem("the upstream sent a malformed HTTP response"), version);
    case UpstreamFailure::switched_protocols:
      return problem_response(core::upstream_bad_response_problem("the upstream switched protocols (101), which idemproxy never asks for"), version);
    case UpstreamFailure::response_too_large:
      return problem_response(core::upstream_bad_response_problem("the upstream response exceeded limits.max_response_body"), version);
  }
  return problem_response(core::internal_problem("unexpected upstream state"), version);
}

asio::awaitable<Response> forward_plain(WorkerServices& services, Request& request, std::string_view client_address,
                                        RequestTrace& trace) {
  const bool head = request.method() == beast_http::verb::head;
  const unsigned version = request.version();
  prepare_upstream_request(request, client_address);
  UpstreamResult result = co_await services.upstream.exchange(request);
  trace.upstream += result.elapsed;
  if (result.failure != UpstreamFailure::none) co_return upstream_failure_response(result.failure, version);
  prepare_client_response(result.response, head);
  co_return std::move(result.response);
}

}  // namespace idem::http
