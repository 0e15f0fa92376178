#include "http/plain_forwarding.hpp"

#include "core/problem.hpp"
#include "http/message_rewriting.hpp"
#include "http/upstream.hpp"
#include "http/upstream_request.hpp"

namespace idem::http {
namespace asio = boost::asio;

asio::awaitable<Response> forward_plain(WorkerServices& services, const ForwardingTerms& terms,
                                        const RequestParts& request, std::string_view client_address,
                                        RequestTrace& trace, const std::vector<std::string>& replay_headers,
                                        std::unique_ptr<OpenResponse>& rest) {
  const bool head = request.method == beast_http::verb::head;
  const unsigned version = request.version;
  const UpstreamRequest upstream_request(request, client_address);
  // Nothing of the body is kept: it streams to the client (bodiless answers come back whole).
  constexpr std::size_t kKept = 0;
  UpstreamResult result = co_await services.upstreams[terms.upstream]->exchange(upstream_request, kKept, terms.timeout);
  trace.upstream += result.elapsed;
  if (result.failure != core::UpstreamFailure::none) {
    co_return problem_response(core::upstream_failure_problem(result.failure), version,
                               services.config->problem_docs_url());
  }
  if (result.rest) {
    strip_upstream_fields(result.response, replay_headers);
    rest = std::move(result.rest);
    co_return std::move(result.response);
  }
  prepare_client_response(result.response, head, replay_headers);
  co_return std::move(result.response);
}

}  // namespace idem::http
