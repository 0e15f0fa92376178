#pragma once
// Turns one client request into one response: plain proxying, or the idempotency flow
// (key -> scope + fingerprint -> claim -> decision -> forward -> complete/release -> respond).
#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/body_handling.hpp"
#include "core/route.hpp"

#include "http/message.hpp"
#include "http/upstream_connection.hpp"
#include "http/request_parts.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"

namespace idem::http {

// The route a request's head matches (null: none) and whether its bodies are streamed
// (core/body_handling.hpp): decided before the body is read.
struct RoutedRequest {
  const core::Route* route = nullptr;
  core::BodyHandling handling = core::BodyHandling::streamed;
  bool key_header_sent = false;  // read for a `key: optional` route only (false for the others)
  ForwardingTerms terms;         // its upstream, timeouts and body limit
};
RoutedRequest route_request(const RuntimeConfig& config, const RequestParts& head);

// The headers an upstream's answer must not carry to the client as its own: the route's replay
// headers, or the default spelling when no route matched.
const std::vector<std::string>& replay_headers_of(const core::Route* route);

// A request route_request() reads whole. Runs on the worker's io thread; `request` must outlive
// it. The store write that completes a record happens before this returns, so the response is
// stored before the client sees it, even if the client has gone away meanwhile. `routed` points
// into the configuration snapshot it was decided with, which the caller holds until this completes.
// `rest` set: the response is an answer's head and first bytes, its body to stream from `rest`.
boost::asio::awaitable<Response> handle_request(WorkerServices& services, const RoutedRequest& routed,
                                                const RequestParts& request, std::string_view client_address,
                                                RequestTrace& trace, std::unique_ptr<OpenResponse>& rest);

}  // namespace idem::http
