#pragma once
// Plain reverse proxying: a request no idempotency rule applies to (a safe method, an unguarded
// route, a missing optional key, fail_open with the store down) goes upstream and back as it is.
#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"
#include "http/upstream_connection.hpp"
#include "http/request_parts.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"

namespace idem::http {

// `replay_headers` are stripped from the answer: the matched route's, or the default spelling when
// no route matched (an upstream's replay header never passes for the proxy's). Nothing of the
// answer's body is kept: the response is its head (`rest` set), the body streamed to the client
// from `rest` (http/streamed_forwarding.hpp); a bodiless answer comes whole, `rest` left empty.
// `terms`: the upstream it goes to and the timeout of its answer's head.
boost::asio::awaitable<Response> forward_plain(WorkerServices& services, const ForwardingTerms& terms,
                                               const RequestParts& request, std::string_view client_address,
                                               RequestTrace& trace, const std::vector<std::string>& replay_headers,
                                               std::unique_ptr<OpenResponse>& rest);

}  // namespace idem::http
