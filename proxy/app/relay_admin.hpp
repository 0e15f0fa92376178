#pragma once
// idemrelay's admin endpoints on the shared admin listener: /healthz (the process answers),
// /readyz (Postgres and the sink are reachable), /metrics (Prometheus text, from RelayStats).
#include <memory>

#include "admin/admin_server.hpp"
#include "config/relay_config.hpp"
#include "metrics/registry.hpp"
#include "relay/stats.hpp"

namespace idem::app {

class RelayAdmin {
 public:
  // Binds and starts serving at once; throws when the address cannot be bound.
  RelayAdmin(const config::AdminConfig& config, const relay::RelayStats& stats);
  ~RelayAdmin();
  unsigned short port() const { return server_->port(); }

 private:
  metrics::Registry registry_;
  std::unique_ptr<admin::AdminServer> server_;
};

}  // namespace idem::app
