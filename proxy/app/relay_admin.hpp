#pragma once
// idemrelay's admin endpoints on the shared admin listener:
//   GET /healthz                 the process answers
//   GET /readyz                  Postgres and the sink are reachable
//   GET /metrics                 Prometheus text, from RelayStats
//   GET /admin/parked[?aggregate=T%2FID][&limit=N]
//                                the dead-lettered rows as JSON (relay/parked_rows.hpp), read on the
//                                admin thread's own one-connection pool
// Everything but the probes takes the bearer token when admin.token is set.
#include <memory>

#include "admin/admin_server.hpp"
#include "config/relay_config.hpp"
#include "metrics/registry.hpp"
#include "pg/pool_options.hpp"
#include "relay/stats.hpp"

namespace idem::pg {
class Pool;
}

namespace idem::app {

class RelayAdmin {
 public:
  // Binds and starts serving at once; throws when the address cannot be bound. `postgres` is for
  // the admin thread's own pool (its size is taken as 1).
  RelayAdmin(const config::AdminConfig& config, pg::PoolOptions postgres, const relay::RelayStats& stats);
  ~RelayAdmin();
  unsigned short port() const { return server_->port(); }

 private:
  void list_parked(const admin::Request& request, const admin::Respond& respond);

  metrics::Registry registry_;
  std::unique_ptr<admin::AdminServer> server_;
  std::shared_ptr<pg::Pool> pool_;  // on server_'s io: declared after it, destroyed before it
};

}  // namespace idem::app
