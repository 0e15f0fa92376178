#pragma once
// Which kind of replication the primary runs, as far as our commits are concerned
// (core/replication_mode.hpp): read from the server, exported as a gauge and warned about.
//
// An acknowledged claim or completion survives a failover only with synchronous replication. The
// server says which: synchronous_standby_names (pg_auto_failover, Patroni and CloudNativePG set it
// on the primary from their synchronous settings, and clear it while no standby can keep up) and
// the session's synchronous_commit (ours asks for `on`: connect_params.hpp).
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/replication_mode.hpp"
#include "pg/errors.hpp"

namespace idem::pg {

class Pool;

// One row: the session's synchronous_commit and the server's synchronous_standby_names.
inline constexpr const char* kReadReplicationSettings =
    "SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names')";

using ReplicationSettingsHandler = std::function<void(PgError, core::ReplicationSettings)>;

// Runs kReadReplicationSettings on `pool` (its io thread); the handler runs there, never inside.
void read_replication_settings(Pool& pool, ReplicationSettingsHandler handler);

// Blocking, for the command line only (`--check`): connects with `dsn` as the pool would (same
// session options, every host in turn), `connect_timeout` per host, and reads the settings.
struct ReplicationCheck {
  std::optional<core::ReplicationSettings> settings;  // absent: the store was not reachable
  std::string error;                                  // why not
};
ReplicationCheck check_replication_settings(const std::string& dsn, std::chrono::milliseconds connect_timeout);

// One line for --check: "synchronous replication (synchronous_commit=on, synchronous_standby_names='...'): ...".
std::string describe_replication(const core::ReplicationSettings& settings);
// check_replication_settings as that line, or "not reachable (<why>): replication mode not checked".
std::string check_replication_report(const std::string& dsn, std::chrono::milliseconds connect_timeout);

// Keeps `gauge` at 1 (synchronous), 0 (asynchronous) or -1 (not known yet) by reading the settings
// through `reader` at start(), every `interval` after, and at refresh() (a reload). The interval is
// short (one tiny statement every 5 s): right after a failover the new primary usually stands
// alone, with no synchronous standby, and that is when the gauge matters. Logs
// `store_replication_asynchronous` (warn) or `store_replication_synchronous` (info) on the first
// answer, on every change, and at each refresh(). Until a first answer, it asks again every few
// seconds. Used only on the io thread of `io` (refresh() and stop() included: post them there).
class ReplicationWatch : public std::enable_shared_from_this<ReplicationWatch> {
 public:
  using Reader = std::function<void(ReplicationSettingsHandler)>;

  ReplicationWatch(boost::asio::io_context& io, Reader reader, std::atomic<int>& gauge,
                   std::chrono::milliseconds interval = std::chrono::seconds(5));
  ReplicationWatch(const ReplicationWatch&) = delete;
  ReplicationWatch& operator=(const ReplicationWatch&) = delete;

  void start();
  void refresh();  // reads now, and logs what it finds even when unchanged
  void stop();     // no read after this (one in progress is ignored)

 private:
  void read(bool log_always);
  void on_read(bool log_always, const PgError& error, const core::ReplicationSettings& settings);
  void schedule(std::chrono::milliseconds delay);

  boost::asio::io_context& io_;
  Reader reader_;
  std::atomic<int>& gauge_;
  std::chrono::milliseconds interval_;
  boost::asio::steady_timer timer_;
  std::optional<core::ReplicationSettings> last_;
  bool stopped_ = false;
};

}  // namespace idem::pg
