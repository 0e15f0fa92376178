#include "relay_admin.hpp"

#include <atomic>
#include <string>

#include "core/problem.hpp"
#include "pg/pool.hpp"
#include "relay/parked_rows.hpp"

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
  counter("idemrelay_published_total", "Outbox rows published and marked (first publish or dedup hit).",
          stats.published);
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
  counter("idemrelay_trace_context_dropped_total",
          "Malformed traceparent/tracestate values in outbox headers, not passed on (the event still is).",
          stats.trace_context_dropped);
  counter("idemrelay_nats_subject_not_in_stream_total",
          "NATS sink: rows not published because the configured stream does not cover their subject (each charged "
          "an attempt, parked after max_attempts).",
          stats.nats_subject_not_in_stream);
  registry.add_callback("idemrelay_lag_seconds", "Age of the oldest unpublished, unparked outbox row.", "gauge",
                        [&stats] { return read(stats.oldest_waiting_age_ms) / 1000.0; });
  registry.add_callback("idemrelay_backlog_rows", "Unpublished, unparked outbox rows.", "gauge",
                        [&stats] { return read(stats.backlog_waiting); });
  registry.add_callback("idemrelay_dead_letters", "Parked (dead-lettered) outbox rows.", "gauge",
                        [&stats] { return read(stats.backlog_parked); });
  registry.add_callback("idemrelay_held_behind_parked_rows",
                        "Unpublished rows waiting behind a parked row of their aggregate (released by a redrive).",
                        "gauge", [&stats] { return read(stats.held_behind_parked); });
  registry.add_callback("idemrelay_sink_up", "1 when the sink is connected.", "gauge",
                        [&stats] { return stats.sink_ready.load() ? 1.0 : 0.0; });
  registry.add_callback(
      "idemrelay_store_synchronous_replication",
      "1 when the Postgres primary replicates synchronously (an acknowledged settle survives a "
      "failover), 0 when not (a failover can lose one: an event may be published again), -1 until known.",
      "gauge", [&stats] { return read(stats.store_synchronous_replication); });
  registry.add_callback("idemrelay_postgres_up", "1 when a pooled Postgres connection is up.", "gauge",
                        [&stats] { return stats.source_connected.load() ? 1.0 : 0.0; });
}

admin::Response problem(const core::Problem& p) {
  return admin::text_response(static_cast<unsigned>(p.status), core::problem_json(p), "application/problem+json");
}

}  // namespace

RelayAdmin::RelayAdmin(const config::AdminConfig& config, pg::PoolOptions postgres, const relay::RelayStats& stats) {
  register_metrics(registry_, stats);
  server_ = std::make_unique<admin::AdminServer>(config.host, config.port, config.token);
  postgres.size = 1;
  pool_ = std::make_shared<pg::Pool>(server_->io(), std::move(postgres));
  pool_->start();
  server_->start([this, &stats](const admin::Request& request, const admin::Respond& respond) {
    const std::string_view target(request.target().data(), request.target().size());
    if (target == "/healthz") {
      respond(admin::text_response(200, "ok\n"));
    } else if (target == "/readyz") {
      const bool ready = stats.sink_ready.load() && stats.source_connected.load();
      respond(admin::text_response(ready ? 200 : 503, ready ? "ready\n" : "not ready: sink or postgres unreachable\n"));
    } else if (target == "/metrics") {
      respond(admin::text_response(200, registry_.render(), "text/plain; version=0.0.4; charset=utf-8"));
    } else if (target == "/admin/parked" || target.starts_with("/admin/parked?")) {
      list_parked(request, respond);
    } else {
      respond(admin::text_response(404, "not found\n"));
    }
  });
}

RelayAdmin::~RelayAdmin() {
  server_->stop();
  pool_->stop();  // the admin thread has ended: nothing else touches the pool
}

void RelayAdmin::list_parked(const admin::Request& request, const admin::Respond& respond) {
  if (request.method() != boost::beast::http::verb::get) {
    core::Problem p = core::bad_request_problem("GET only");
    p.status = 405;
    p.title = "Method not allowed";
    respond(problem(p));
    return;
  }
  const std::string_view target(request.target().data(), request.target().size());
  const std::size_t question = target.find('?');
  const relay::ParkedTarget parsed =
      relay::parse_parked_query_string(question == std::string_view::npos ? "" : target.substr(question + 1));
  if (!parsed.query) {
    respond(problem(core::bad_request_problem(parsed.error)));
    return;
  }
  const std::size_t limit = parsed.query->limit;
  auto statement = std::make_shared<pg::Statement>(relay::parked_statement(*parsed.query));
  pool_->execute(std::move(statement), [respond, limit](const pg::PgError& error, pg::ResultHandle result) {
    if (!error.ok()) {
      admin::Response response = problem(core::Problem{.status = 503,
                                                       .slug = "outbox-unavailable",
                                                       .title = "Outbox unavailable",
                                                       .detail = "reading the parked rows failed: " + error.message,
                                                       .retry_after = std::chrono::seconds(1)});
      response.set(boost::beast::http::field::retry_after, "1");
      respond(std::move(response));
      return;
    }
    const auto list = relay::decode_parked(result.get(), limit);
    if (!list) {
      respond(problem(core::internal_problem("unexpected row shape")));
      return;
    }
    respond(admin::text_response(200, relay::parked_json(*list), "application/json"));
  });
}

}  // namespace idem::app
