#include "relay_admin.hpp"

#include <atomic>
#include <string>

namespace idem::app {
namespace {

template <class T>
double read(const std::atomic<T>& value) {
  return static_cast<double>(value.load(std::memory_order_relaxed));
}

void register_metrics(metrics::Registry& registry, const relay::RelayStats& stats) {
  const auto counter = [&](std::string name, std::string help, const std::atomic<std::uint64_t>& value) {
    registry.add_callback(std::move(name), std::move(help), "counter", [&value] { return read(value); });
  };
  counter("idemrelay_published_total", "Outbox rows published and marked (first publish or dedup hit).", stats.published);
  counter("idemrelay_duplicates_total", "Re-published rows the sink already had (dedup marker hit).", stats.duplicates);
  counter("idemrelay_publish_failures_total", "Rows whose publish failed and were scheduled for a retry.",
          stats.publish_failures);
  counter("idemrelay_parked_total", "Rows this process parked as dead letters.", stats.parked);
  counter("idemrelay_released_total", "Rows handed back unattempted (held behind a failure, sink down, shutdown).",
          stats.released);
  counter("idemrelay_sink_unavailable_total", "Batches that found the sink unreachable.", stats.sink_unavailable);
  counter("idemrelay_source_failures_total", "Claim and settle statements that failed.", stats.source_failures);
  counter("idemrelay_lease_lost_total", "Rows whose settle found another claim owning them.", stats.lease_lost);
  counter("idemrelay_retention_deleted_total", "Published rows deleted by retention.", stats.retention_deleted);
  counter("idemrelay_claims_total", "Claim statements that succeeded.", stats.claims);
  registry.add_callback("idemrelay_lag_seconds", "Age of the oldest unpublished, unparked outbox row.", "gauge",
                        [&stats] { return read(stats.oldest_waiting_age_ms) / 1000.0; });
  registry.add_callback("idemrelay_backlog_rows", "Unpublished, unparked outbox rows.", "gauge",
                        [&stats] { return read(stats.backlog_waiting); });
  registry.add_callback("idemrelay_dead_letters", "Parked (dead-lettered) outbox rows.", "gauge",
                        [&stats] { return read(stats.backlog_parked); });
  registry.add_callback("idemrelay_sink_up", "1 when the sink is connected.", "gauge",
                        [&stats] { return stats.sink_ready.load() ? 1.0 : 0.0; });
  registry.add_callback("idemrelay_store_synchronous_replication",
                        "1 when the Postgres primary replicates synchronously (an acknowledged settle survives a "
                        "failover), 0 when not (a failover can lose one: an event may be published again), -1 until known.",
                        "gauge", [&stats] { return read(stats.store_synchronous_replication); });
  registry.add_callback("idemrelay_postgres_up", "1 when a pooled Postgres connection is up.", "gauge",
                        [&stats] { return stats.source_connected.load() ? 1.0 : 0.0; });
}

}  // namespace

RelayAdmin::RelayAdmin(const config::AdminConfig& config, const relay::RelayStats& stats) {
  register_metrics(registry_, stats);
  server_ = std::make_unique<admin::AdminServer>(config.host, config.port, config.token);
  server_->start([this, &stats](const admin::Request& request, const admin::Respond& respond) {
    const std::string_view target(request.target().data(), request.target().size());
    if (target == "/healthz") {
      respond(admin::text_response(200, "ok\n"));
    } else if (target == "/readyz") {
      const bool ready = stats.sink_ready.load() && stats.source_connected.load();
      respond(admin::text_response(ready ? 200 : 503, ready ? "ready\n" : "not ready: sink or postgres unreachable\n"));
    } else if (target == "/metrics") {
      respond(admin::text_response(200, registry_.render(), "text/plain; version=0.0.4; charset=utf-8"));
    } else {
      respond(admin::text_response(404, "not found\n"));
    }
  });
}

RelayAdmin::~RelayAdmin() { server_->stop(); }

}  // namespace idem::app
