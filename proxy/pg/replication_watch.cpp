#include "pg/replication_watch.hpp"

#include <libpq-fe.h>

#include <utility>

#include "log/log.hpp"
#include "pg/binary_row.hpp"
#include "pg/blocking_session.hpp"
#include "pg/connect_params.hpp"  // kSessionServerOptions
#include "pg/handles.hpp"
#include "pg/pool.hpp"
#include "pg/statement.hpp"

namespace idem::pg {
namespace {

// Until the first answer (the pool still connecting, the server down), ask this often.
constexpr std::chrono::milliseconds kRetryUntilKnown{5'000};

std::string quoted(const std::string& text) { return "'" + text + "'"; }

}  // namespace

void read_replication_settings(Pool& pool, ReplicationSettingsHandler handler) {
  static const auto statement =
      std::make_shared<const Statement>(Statement{"read_replication_settings", kReadReplicationSettings, {}});
  pool.execute(statement, [handler = std::move(handler)](PgError error, ResultHandle result) {
    if (!error.ok()) {
      handler(std::move(error), {});
      return;
    }
    const BinaryRow row(result.get(), 0);
    const auto commit = PQntuples(result.get()) == 1 ? row.text(0) : std::nullopt;
    const auto standbys = PQntuples(result.get()) == 1 ? row.text(1) : std::nullopt;
    if (!commit || !standbys) {
      handler(PgError{PgErrorKind::internal, {}, "unexpected replication settings row"}, {});
      return;
    }
    handler({}, core::ReplicationSettings{std::string(*commit), std::string(*standbys)});
  });
}

ReplicationCheck check_replication_settings(const std::string& dsn, std::chrono::milliseconds connect_timeout) {
  ReplicationCheck check;
  BlockingSession session(dsn, connect_timeout, kSessionServerOptions);
  const ResultHandle result = session.run("read replication settings", kReadReplicationSettings);
  if (!result || PQntuples(result.get()) != 1) {
    check.error = result ? "unexpected replication settings row" : session.error();
    return check;
  }
  const BinaryRow row(result.get(), 0);
  const auto commit = row.text(0);
  const auto standbys = row.text(1);
  if (!commit || !standbys) {
    check.error = "unexpected replication settings row";
    return check;
  }
  check.settings = core::ReplicationSettings{std::string(*commit), std::string(*standbys)};
  return check;
}

std::string describe_replication(const core::ReplicationSettings& settings) {
  const core::ReplicationMode mode = core::replication_mode(settings);
  return std::string(core::replication_mode_name(mode)) +
         " replication (synchronous_commit=" + settings.synchronous_commit +
         ", synchronous_standby_names=" + quoted(settings.synchronous_standby_names) +
         "): " + std::string(core::replication_mode_meaning(mode));
}

std::string check_replication_report(const std::string& dsn, std::chrono::milliseconds connect_timeout) {
  const ReplicationCheck check = check_replication_settings(dsn, connect_timeout);
  if (!check.settings) return "not reachable (" + check.error + "): replication mode not checked";
  return describe_replication(*check.settings);
}

ReplicationWatch::ReplicationWatch(boost::asio::io_context& io, Reader reader, std::atomic<int>& gauge,
                                   std::chrono::milliseconds interval)
    : io_(io), reader_(std::move(reader)), gauge_(gauge), interval_(interval), timer_(io) {}

void ReplicationWatch::start() { read(false); }

void ReplicationWatch::refresh() { read(true); }

void ReplicationWatch::stop() {
  stopped_ = true;
  timer_.cancel();
}

void ReplicationWatch::read(bool log_always) {
  if (stopped_) return;
  reader_([weak = weak_from_this(), log_always](const PgError& error, const core::ReplicationSettings& settings) {
    if (const auto self = weak.lock()) self->on_read(log_always, error, settings);
  });
}

void ReplicationWatch::on_read(bool log_always, const PgError& error, const core::ReplicationSettings& settings) {
  if (stopped_) return;
  if (!error.ok()) {
    // Unknown again only while never known: a store that is down says nothing about its replication.
    schedule(last_ ? interval_ : kRetryUntilKnown);
    return;
  }
  const core::ReplicationMode mode = core::replication_mode(settings);
  gauge_.store(mode == core::ReplicationMode::synchronous ? 1 : 0);
  const bool changed = !last_ || last_->synchronous_commit != settings.synchronous_commit ||
                       last_->synchronous_standby_names != settings.synchronous_standby_names;
  if (changed || log_always) {
    const bool asynchronous = mode == core::ReplicationMode::asynchronous;
    log::write(asynchronous ? log::Level::warn : log::Level::info,
               asynchronous ? "store_replication_asynchronous" : "store_replication_synchronous",
               {{"synchronous_commit", settings.synchronous_commit},
                {"synchronous_standby_names", settings.synchronous_standby_names},
                {"meaning", core::replication_mode_meaning(mode)}});
  }
  last_ = settings;
  schedule(interval_);
}

void ReplicationWatch::schedule(std::chrono::milliseconds delay) {
  timer_.expires_after(delay);
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
    if (error) return;
    if (const auto self = weak.lock()) self->read(false);
  });
}

}  // namespace idem::pg
