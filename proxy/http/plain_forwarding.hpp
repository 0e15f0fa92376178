#pragma once
// Plain reverse proxying: a request no idempotency rule applies to (a safe method, an unguarded
// route, a missing optional key, fail_open with the store down) goes upstream and back as it is.
#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "http/answer.hpp"
#include "http/request_parts.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"

namespace idem::http {

// `replay_headers` are stripped from the answer: the matched route's, or the default spelling when
// no route matched (an upstream's replay header never passes for the proxy's). Nothing of the
// answer's body is kept: it is streamed to the client (Answer::rest).
boost::asio::awaitable<Answer> forward_plain(WorkerServices& services, const RequestParts& request,
                                             std::string_view client_address, RequestTrace& trace,
                                             const std::vector<std::string>& replay_headers);

}  // namespace idem::http
