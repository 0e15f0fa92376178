#include "store/pg/pg_store.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <charconv>
#include <string>
#include <utility>

#include "store/pg/counters.hpp"
#include "store/pg/errors.hpp"
#include "store/pg/log.hpp"
#include "store/pg/pool.hpp"
#include "store/pg/record_codec.hpp"

namespace idem::store::pg {
namespace {

// Attempts per operation: a retryable SQLSTATE, or a claim that met the race (no row), runs again.
constexpr int kMaxAttempts = 3;

void log_statement_failure(std::string_view statement, const PgError& error) {
  std::string what = std::string(statement) + " failed (" + std::string(pg_error_kind_name(error.kind));
  if (!error.sqlstate.empty()) what += ", SQLSTATE " + error.sqlstate;
  what += ")";
  log_event(what, error.message);
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
  pool->execute(statement, [weak_pool, statement, attempt, handler = std::move(handler)](
                               PgError error, ResultHandle result) mutable {
    if (error.kind == PgErrorKind::retryable && attempt < kMaxAttempts) {
      run_claim(weak_pool, std::move(statement), attempt + 1, std::move(handler));
      return;
    }
    if (!error.ok()) {
      if (error.kind == PgErrorKind::internal || error.kind == PgErrorKind::retryable) {
        log_statement_failure(statement->name, error);
      }
      handler(to_store_error(error.kind), {});
      return;
    }
    const int rows = PQntuples(result.get());
    if (rows == 0) {
      // The conflicting row was committed while we waited for it: not visible to this
      // statement's snapshot. A fresh statement sees it.
      pg_counters().claim_reruns.fetch_add(1, std::memory_order_relaxed);
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

// complete and release: one row changed = ok, none = the record is not ours (any more).
void run_owned_change(const std::weak_ptr<Pool>& weak_pool, std::shared_ptr<const Statement> statement,
                      int attempt, DoneHandler handler) {
  const auto pool = weak_pool.lock();
  if (!pool) {
    handler(StoreError::unavailable);
    return;
  }
  pool->execute(statement, [weak_pool, statement, attempt, handler = std::move(handler)](
                               PgError error, ResultHandle result) mutable {
    if (error.kind == PgErrorKind::retryable && attempt < kMaxAttempts) {
      run_owned_change(weak_pool, std::move(statement), attempt + 1, std::move(handler));
      return;
    }
    if (!error.ok()) {
      if (error.kind == PgErrorKind::internal || error.kind == PgErrorKind::retryable) {
        log_statement_failure(statement->name, error);
      }
      handler(to_store_error(error.kind));
      return;
    }
    const std::string_view affected = PQcmdTuples(result.get());
    long long rows = -1;
    const auto [end, parse_error] = std::from_chars(affected.data(), affected.data() + affected.size(), rows);
    if (parse_error != std::errc{} || end != affected.data() + affected.size() || rows < 0 || rows > 1) {
      log_statement_failure(statement->name,
                            {PgErrorKind::internal, {}, "unexpected affected-row count '" + std::string(affected) + "'"});
      handler(StoreError::internal);
      return;
    }
    handler(rows == 1 ? StoreError::ok : StoreError::not_owner);
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

void PgStore::claim(const ClaimRequest& request, ClaimHandler handler) {
  run_claim(impl_->pool, std::make_shared<const Statement>(claim_statement(request)), 1, std::move(handler));
}

void PgStore::complete(const CompleteRequest& request, DoneHandler handler) {
  if (request.state == core::RecordState::in_flight) {  // a caller bug: nothing to store
    boost::asio::post(impl_->io, [handler = std::move(handler)] { handler(StoreError::internal); });
    return;
  }
  run_owned_change(impl_->pool, std::make_shared<const Statement>(complete_statement(request)), 1,
                   std::move(handler));
}

void PgStore::release(const ReleaseRequest& request, DoneHandler handler) {
  run_owned_change(impl_->pool, std::make_shared<const Statement>(release_statement(request)), 1,
                   std::move(handler));
}

}  // namespace idem::store::pg
