#include "relay/outbox_source.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "pg/binary_row.hpp"
#include "pg/pool.hpp"
#include "pg/replication_watch.hpp"
#include "pg/statement.hpp"
#include "relay/sql.hpp"

namespace idem::relay {
namespace {

using pg::BinaryRow;
using pg::Param;
using pg::PgError;
using pg::PgErrorKind;
using pg::ResultHandle;
using pg::Statement;

PgError decode_error(std::string what) { return {PgErrorKind::internal, {}, std::move(what)}; }

std::size_t affected_rows(const PGresult* result) {
  const char* text = PQcmdTuples(const_cast<PGresult*>(result));
  std::size_t count = 0;
  if (text != nullptr) std::from_chars(text, text + std::char_traits<char>::length(text), count);
  return count;
}

}  // namespace

OutboxSource::OutboxSource(boost::asio::io_context& io, pg::PoolOptions options)
    : pool_(std::make_shared<pg::Pool>(io, std::move(options))) {}

OutboxSource::~OutboxSource() { pool_->stop(); }

void OutboxSource::start() { pool_->start(); }
void OutboxSource::stop() { pool_->stop(); }
bool OutboxSource::connected() const { return pool_->connected(); }

void OutboxSource::claim(std::size_t limit, const std::string& token, std::chrono::milliseconds lease,
                         ClaimHandler handler) {
  auto statement = std::make_shared<Statement>(
      Statement{"claim",
                sql::kClaim,
                {Param::int8(static_cast<std::int64_t>(limit)), Param::text(token), Param::int8(lease.count())}});
  pool_->execute(std::move(statement), [handler = std::move(handler)](PgError error, ResultHandle result) {
    if (!error.ok()) {
      handler(std::move(error), {});
      return;
    }
    std::vector<OutboxRow> rows;
    const int count = PQntuples(result.get());
    rows.reserve(static_cast<std::size_t>(count));
    for (int index = 0; index < count; ++index) {
      const BinaryRow row(result.get(), index);
      const auto id = row.int8(0);
      const auto aggregate_type = row.text(1);
      const auto aggregate_id = row.text(2);
      const auto event_type = row.text(3);
      const auto payload = row.text(4);
      const auto headers = row.text(5);
      const auto created_at = row.text(6);
      const auto attempts = row.int4(7);
      const auto created_micros = row.int8(8);
      const auto traceparent = row.is_null(9) ? std::optional<std::string_view>("") : row.text(9);
      const auto tracestate = row.is_null(10) ? std::optional<std::string_view>("") : row.text(10);
      const auto lane = row.int4(11);
      if (!id || !aggregate_type || !aggregate_id || !event_type || !payload || !headers || !created_at || !attempts ||
          !created_micros || !traceparent || !tracestate || !lane) {
        handler(decode_error("claim: unexpected row shape"), {});
        return;
      }
      rows.push_back(OutboxRow{.id = *id,
                               .aggregate_type = std::string(*aggregate_type),
                               .aggregate_id = std::string(*aggregate_id),
                               .event_type = std::string(*event_type),
                               .payload = std::string(*payload),
                               .headers = std::string(*headers),
                               .created_at = std::string(*created_at),
                               .created_at_micros = *created_micros,
                               .attempts = *attempts,
                               .traceparent = std::string(*traceparent),
                               .tracestate = std::string(*tracestate),
                               .lane = *lane});
    }
    std::sort(rows.begin(), rows.end(), [](const OutboxRow& a, const OutboxRow& b) { return a.id < b.id; });
    handler({}, std::move(rows));
  });
}

void OutboxSource::settle(const std::string& token, const std::vector<RowSettlement>& settlements,
                          CountHandler handler) {
  std::vector<std::int64_t> all, published, retry, parked, failed, delays;
  std::vector<std::int32_t> lanes;  // a few (a claim takes at most 16 lanes)
  std::vector<std::string> errors;
  all.reserve(settlements.size());
  published.reserve(settlements.size());
  for (const RowSettlement& settlement : settlements) {
    all.push_back(settlement.id);
    if (std::find(lanes.begin(), lanes.end(), settlement.lane) == lanes.end()) lanes.push_back(settlement.lane);
    switch (settlement.outcome) {
      case Settlement::released: continue;
      case Settlement::published: published.push_back(settlement.id); continue;
      case Settlement::retry: retry.push_back(settlement.id); break;
      case Settlement::parked: parked.push_back(settlement.id); break;
    }
    failed.push_back(settlement.id);
    delays.push_back(settlement.delay.count());
    errors.push_back(settlement.error);
  }
  auto statement = std::make_shared<Statement>(
      Statement{"settle",
                sql::kSettle,
                {Param::text(token), Param::int8_array(all), Param::int8_array(published), Param::int8_array(retry),
                 Param::int8_array(parked), Param::int8_array(failed), Param::int8_array(delays),
                 Param::text_array(errors), Param::int4_array(lanes)}});
  pool_->execute(std::move(statement), [handler = std::move(handler)](PgError error, ResultHandle result) {
    if (!error.ok()) {
      handler(std::move(error), 0);
      return;
    }
    handler({}, affected_rows(result.get()));
  });
}

void OutboxSource::release_claim(const std::string& token, CountHandler handler) {
  auto statement = std::make_shared<Statement>(Statement{"release_claim", sql::kReleaseClaim, {Param::text(token)}});
  pool_->execute(std::move(statement), [handler = std::move(handler)](PgError error, ResultHandle result) {
    if (!error.ok()) {
      handler(std::move(error), 0);
      return;
    }
    handler({}, affected_rows(result.get()));
  });
}

void OutboxSource::delete_published(std::chrono::milliseconds older_than, std::size_t limit, CountHandler handler) {
  auto statement = std::make_shared<Statement>(
      Statement{"retention",
                sql::kDeletePublished,
                {Param::int8(older_than.count()), Param::int8(static_cast<std::int64_t>(limit))}});
  pool_->execute(std::move(statement), [handler = std::move(handler)](PgError error, ResultHandle result) {
    if (!error.ok()) {
      handler(std::move(error), 0);
      return;
    }
    handler({}, affected_rows(result.get()));
  });
}

void OutboxSource::backlog(BacklogHandler handler) {
  auto statement = std::make_shared<Statement>(Statement{"backlog", sql::kBacklog, {}});
  pool_->execute(std::move(statement), [handler = std::move(handler)](PgError error, ResultHandle result) {
    if (!error.ok()) {
      handler(std::move(error), {});
      return;
    }
    const BinaryRow row(result.get(), 0);
    const auto waiting = row.int8(0);
    const auto parked = row.int8(1);
    const auto age = row.int8(2);
    if (PQntuples(result.get()) != 1 || !waiting || !parked || !age) {
      handler(decode_error("backlog: unexpected row shape"), {});
      return;
    }
    handler({}, Backlog{.waiting = *waiting, .parked = *parked, .oldest_age_ms = *age});
  });
}

void OutboxSource::held_behind_parked(std::function<void(pg::PgError, std::int64_t rows)> handler) {
  auto statement = std::make_shared<Statement>(Statement{"held_behind_parked", sql::kHeldBehindParked, {}});
  pool_->execute(std::move(statement), [handler = std::move(handler)](PgError error, ResultHandle result) {
    if (!error.ok()) {
      handler(std::move(error), 0);
      return;
    }
    const auto rows = PQntuples(result.get()) == 1 ? BinaryRow(result.get(), 0).int8(0) : std::nullopt;
    if (!rows) {
      handler(decode_error("held_behind_parked: unexpected row shape"), 0);
      return;
    }
    handler({}, *rows);
  });
}

void OutboxSource::replication_settings(std::function<void(pg::PgError, core::ReplicationSettings)> handler) {
  pg::read_replication_settings(*pool_, std::move(handler));
}

}  // namespace idem::relay
