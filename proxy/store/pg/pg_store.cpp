#include "store/pg/pg_store.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <charconv>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pg/errors.hpp"
#include "pg/log.hpp"
#include "pg/pool.hpp"
#include "pg/replication_watch.hpp"
#include "store/pg/record_codec.hpp"
#include "store/pg/store_counters.hpp"
#include "store/pg/store_error.hpp"

namespace idem::store::pg {

using idem::pg::log_event;
using idem::pg::PgError;
using idem::pg::PgErrorKind;
using idem::pg::Pool;
using idem::pg::PoolOptions;
using idem::pg::ResultHandle;
using idem::pg::Statement;

namespace {

// Attempts per operation: a retryable SQLSTATE, or a claim that met the race (no row), runs again.
constexpr int kMaxAttempts = 3;

void log_statement_failure(std::string_view statement, const PgError& error) {
  std::string what = std::string(statement) + " failed (" + std::string(idem::pg::pg_error_kind_name(error.kind));
  if (!error.sqlstate.empty()) what += ", SQLSTATE " + error.sqlstate;
  what += ")";
  log_event(what, error.message);
}

// Failures a caller cannot explain (internal, retries exhausted), and a server that turned
// read-only under us (a failover): logged here with their SQLSTATE. Connection losses are the
// pool's to log.
bool worth_logging(PgErrorKind kind) {
  return kind == PgErrorKind::internal || kind == PgErrorKind::retryable || kind == PgErrorKind::read_only;
}

// Every statement's handler holds the pool weakly: once the store is gone, a re-run is not
// attempted and the caller hears `unavailable`.
void run_claim(const std::weak_ptr<Pool>& weak_pool, std::shared_ptr<const Statement> statement, int attempt,
               ClaimHandler handler) {
  const auto pool = weak_pool.lock();
  if (!pool) {
    handler(StoreError::unavailable, {});
    return;
  }
  pool->execute(statement, [weak_pool, statement, attempt, handler = std::move(handler)](const PgError& error,
                                                                                         ResultHandle result) mutable {
    if (error.kind == PgErrorKind::retryable && attempt < kMaxAttempts) {
      run_claim(weak_pool, std::move(statement), attempt + 1, std::move(handler));
      return;
    }
    if (!error.ok()) {
      if (worth_logging(error.kind)) log_statement_failure(statement->name, error);
      handler(to_store_error(error.kind), {});
      return;
    }
    const int rows = PQntuples(result.get());
    if (rows == 0) {
      // The conflicting row was committed while we waited for it: not visible to this
      // statement's snapshot. A fresh statement sees it.
      pg_store_counters().claim_reruns.fetch_add(1, std::memory_order_relaxed);
      if (attempt < kMaxAttempts) {
        run_claim(weak_pool, std::move(statement), attempt + 1, std::move(handler));
        return;
      }
      log_statement_failure(statement->name, {PgErrorKind::internal, {}, "no row after every attempt"});
      handler(StoreError::internal, {});
      return;
    }
    if (rows != 1) {
      log_statement_failure(statement->name, {PgErrorKind::internal, {}, std::to_string(rows) + " rows"});
      handler(StoreError::internal, {});
      return;
    }
    DecodedClaim decoded = decode_claim_row(result.get(), 0);
    if (!decoded.claim) {
      log_statement_failure(statement->name, {PgErrorKind::internal, {}, decoded.error});
      handler(StoreError::internal, {});
      return;
    }
    handler(StoreError::ok, std::move(*decoded.claim));
  });
}

// What a statement other than the claim ends with: `ok` with its result, or the error.
using ResultHandler = std::function<void(StoreError, ResultHandle)>;

// Runs `statement`, again after a retryable SQLSTATE (it changed nothing) up to kMaxAttempts.
// Failures the caller cannot explain (internal, retries exhausted) are logged here.
void run_statement(const std::weak_ptr<Pool>& weak_pool, std::shared_ptr<const Statement> statement, int attempt,
                   ResultHandler done) {
  const auto pool = weak_pool.lock();
  if (!pool) {
    done(StoreError::unavailable, nullptr);
    return;
  }
  pool->execute(statement, [weak_pool, statement, attempt, done = std::move(done)](const PgError& error,
                                                                                   ResultHandle result) mutable {
    if (error.kind == PgErrorKind::retryable && attempt < kMaxAttempts) {
      run_statement(weak_pool, std::move(statement), attempt + 1, std::move(done));
      return;
    }
    if (!error.ok()) {
      if (worth_logging(error.kind)) log_statement_failure(statement->name, error);
      done(to_store_error(error.kind), nullptr);
      return;
    }
    done(StoreError::ok, std::move(result));
  });
}

// The row count of an INSERT/UPDATE/DELETE's command tag; nullopt (logged) when it is not one.
// (libpq's PQcmdTuples takes a non-const result.)
std::optional<std::uint64_t> affected_rows(std::string_view statement_name, PGresult* result) {
  const std::string_view affected = PQcmdTuples(result);
  std::uint64_t rows = 0;
  const auto [end, parse_error] = std::from_chars(affected.data(), affected.data() + affected.size(), rows);
  if (affected.empty() || parse_error != std::errc{} || end != affected.data() + affected.size()) {
    log_statement_failure(statement_name,
                          {PgErrorKind::internal, {}, "unexpected affected-row count '" + std::string(affected) + "'"});
    return std::nullopt;
  }
  return rows;
}

// Statements keyed by the primary key that change one row or none: one row = ok, none =
// `no_row` (not_owner for the owner's statements, not_found for the operator's).
void run_single_row_change(const std::weak_ptr<Pool>& weak_pool, std::shared_ptr<const Statement> statement,
                           StoreError no_row, DoneHandler handler) {
  const std::string_view name = statement->name;
  run_statement(weak_pool, std::move(statement), 1,
                [name, no_row, handler = std::move(handler)](StoreError error, ResultHandle result) {
                  if (error != StoreError::ok) {
                    handler(error);
                    return;
                  }
                  const auto rows = affected_rows(name, result.get());
                  if (!rows || *rows > 1) {
                    if (rows)
                      log_statement_failure(name, {PgErrorKind::internal, {}, std::to_string(*rows) + " rows changed"});
                    handler(StoreError::internal);
                    return;
                  }
                  handler(*rows == 1 ? StoreError::ok : no_row);
                });
}

}  // namespace

struct PgStore::Impl {
  boost::asio::io_context& io;
  std::shared_ptr<Pool> pool;
};

PgStore::PgStore(boost::asio::io_context& io, PoolOptions options)
    : impl_(std::make_unique<Impl>(Impl{io, std::make_shared<Pool>(io, std::move(options))})) {}

// Statements still running complete later with `unavailable` (their connections are closed);
// their handlers hold no reference to this object.
PgStore::~PgStore() { stop(); }

void PgStore::start() { impl_->pool->start(); }

void PgStore::stop() { impl_->pool->stop(); }

bool PgStore::connected() const { return impl_->pool->connected(); }

void PgStore::read_replication_settings(std::function<void(idem::pg::PgError, core::ReplicationSettings)> handler) {
  idem::pg::read_replication_settings(*impl_->pool, std::move(handler));
}

void PgStore::claim(const ClaimRequest& request, ClaimHandler handler) {
  run_claim(impl_->pool, std::make_shared<const Statement>(claim_statement(request)), 1, std::move(handler));
}

void PgStore::complete(const CompleteRequest& request, DoneHandler handler) {
  // Caller bugs: nothing to store, or a record that would expire the moment it completes.
  if (request.state == core::RecordState::in_flight || request.ttl <= std::chrono::milliseconds::zero()) {
    boost::asio::post(impl_->io, [handler = std::move(handler)] { handler(StoreError::internal); });
    return;
  }
  run_single_row_change(impl_->pool, std::make_shared<const Statement>(complete_statement(request)),
                        StoreError::not_owner, std::move(handler));
}

void PgStore::release(const ReleaseRequest& request, DoneHandler handler) {
  run_statement(impl_->pool, std::make_shared<const Statement>(release_statement(request)), 1,
                [handler = std::move(handler)](StoreError error, ResultHandle result) {
                  if (error != StoreError::ok) return handler(error);
                  const std::optional<bool> released =
                      PQntuples(result.get()) == 1 ? decode_release_row(result.get(), 0) : std::nullopt;
                  if (!released) {
                    log_statement_failure("release", {PgErrorKind::internal, {}, "not one `released` row"});
                    return handler(StoreError::internal);
                  }
                  handler(*released ? StoreError::ok : StoreError::not_owner);
                });
}

void PgStore::mark_unknown(const ReleaseRequest& request, DoneHandler handler) {
  if (request.ttl <= std::chrono::milliseconds::zero()) {  // a caller bug: it would expire at once
    boost::asio::post(impl_->io, [handler = std::move(handler)] { handler(StoreError::internal); });
    return;
  }
  run_single_row_change(impl_->pool, std::make_shared<const Statement>(mark_unknown_statement(request)),
                        StoreError::not_owner, std::move(handler));
}

void PgStore::force_release(const RecordKey& key, ForceReleaseHandler handler) {
  run_statement(impl_->pool, std::make_shared<const Statement>(force_release_statement(key)), 1,
                [handler = std::move(handler)](StoreError error, ResultHandle result) {
                  using std::chrono::milliseconds;
                  if (error != StoreError::ok) return handler(error, milliseconds{0});
                  const int rows = PQntuples(result.get());
                  if (rows == 0) return handler(StoreError::not_found, milliseconds{0});
                  const DecodedForceRelease decoded =
                      rows == 1 ? decode_force_release_row(result.get(), 0)
                                : DecodedForceRelease{std::nullopt, std::to_string(rows) + " rows for one key"};
                  if (!decoded.outcome) {
                    log_statement_failure("force_release", {PgErrorKind::internal, {}, decoded.error});
                    return handler(StoreError::internal, milliseconds{0});
                  }
                  if (decoded.outcome->released) return handler(StoreError::ok, milliseconds{0});
                  handler(StoreError::lease_running, decoded.outcome->lease_remaining);
                });
}

void PgStore::sweep_expired(std::size_t batch, SweepHandler handler) {
  run_statement(impl_->pool, std::make_shared<const Statement>(sweep_expired_statement(batch)), 1,
                [handler = std::move(handler)](StoreError error, ResultHandle result) {
                  if (error != StoreError::ok) {
                    handler(error, 0);
                    return;
                  }
                  const auto rows = affected_rows("sweep_expired", result.get());
                  if (!rows) {
                    handler(StoreError::internal, 0);
                    return;
                  }
                  handler(StoreError::ok, static_cast<std::size_t>(*rows));
                });
}

void PgStore::inspect(const RecordKey& key, InspectHandler handler) {
  run_statement(impl_->pool, std::make_shared<const Statement>(inspect_statement(key)), 1,
                [handler = std::move(handler)](StoreError error, ResultHandle result) {
                  if (error != StoreError::ok) {
                    handler(error, {});
                    return;
                  }
                  const int rows = PQntuples(result.get());
                  if (rows == 0) {
                    handler(StoreError::not_found, {});
                    return;
                  }
                  DecodedInspect decoded =
                      rows == 1 ? decode_inspect_row(result.get(), 0)
                                : DecodedInspect{std::nullopt, std::to_string(rows) + " rows for one key"};
                  if (!decoded.info) {
                    log_statement_failure("inspect", {PgErrorKind::internal, {}, decoded.error});
                    handler(StoreError::internal, {});
                    return;
                  }
                  handler(StoreError::ok, std::move(*decoded.info));
                });
}

}  // namespace idem::store::pg
