#pragma once
// Turns one client request into one response: plain proxying, or the idempotency flow
// (key -> scope + fingerprint -> claim -> decision -> forward -> complete/release -> respond).
#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "http/message.hpp"
#include "http/request_parts.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"

namespace idem::http {

// Runs on the worker's io thread; `request` must outlive it. The store write that completes a
// record happens before this returns, so the response is stored before the client sees it, even
// if the client has gone away meanwhile.
boost::asio::awaitable<Response> handle_request(WorkerServices& services, const RequestParts& request,
                                                std::string_view client_address, RequestTrace& trace);

}  // namespace idem::http
