#pragma once
// The idempotency flow for one request on a route that enforces keys:
// scope + fingerprint -> claim -> decision -> (forward -> complete | release) -> response.
#include <boost/asio/awaitable.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/route.hpp"
#include "http/message.hpp"
#include "http/upstream_connection.hpp"
#include "http/request_parts.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"

namespace idem::http {

// `key` is the idempotency key parsed from its header, or std::nullopt when the route reads it
// from the JSON body (key_from_json): then the fingerprint's parse reads it, and a body without a
// usable one is answered 400 (or proxied plainly when the route's key is optional and the body has
// none). `path`/`query` split from the request target. The record is completed (or released)
// before this returns, so the response is stored before the client sees it; a completion write
// that fails is retried in the background until the lease ends. An answer whose body goes past
// the route's max_stored_body comes back as its head and first bytes, the rest in `rest` for the
// client connection to stream (the record already settled).
boost::asio::awaitable<Response> run_idempotent_exchange(WorkerServices& services, const ForwardingTerms& terms,
                                                         const core::RoutePolicy& policy, const RequestParts& request,
                                                         std::string_view client_address,
                                                         std::optional<std::string> key, std::string_view path,
                                                         std::string_view query, RequestTrace& trace,
                                                         std::unique_ptr<OpenResponse>& rest);

}  // namespace idem::http
