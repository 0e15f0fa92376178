#pragma once
// idemproxy's admin routes on the shared admin listener:
//   GET  /healthz                          process alive
//   GET  /readyz                           200 when the store is reachable and the proxy is not draining
//   GET  /metrics                          Prometheus text format
//   GET  /admin/keys/{route}/{key}         the record (state, fingerprint, times, status), never the body
//   POST /admin/keys/{route}/{key}/release release an `unknown` or in-flight record
// The record routes take the route's scope headers as the original request sent them, or
// `?scope=<scope>` verbatim. Every admin action is logged.
#include <atomic>
#include <functional>
#include <memory>

#include "admin/admin_server.hpp"
#include "http/runtime.hpp"

namespace idem::store {
class Store;
}
namespace idem::store::pg {
class PgStore;
}
namespace idem::metrics {
class Registry;
}

namespace idem::app {

struct ProxyAdminContext {
  std::function<std::shared_ptr<const http::RuntimeConfig>()> config;  // the current snapshot
  metrics::Registry& metrics;
  const std::atomic<bool>& draining;
  store::pg::PgStore& store;  // the admin thread's own store (one connection)
};

admin::Handler make_proxy_admin_handler(ProxyAdminContext context);

}  // namespace idem::app
