#pragma once
// The outbox table seen through the async Postgres pool: claim a batch, settle it, delete old
// published rows, read the backlog. Every call is one short statement (one transaction).
//
// Used only on the io thread that runs `io`. Handlers run exactly once, on that thread, never
// inside the call. After stop(), calls fail `unavailable`.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/replication_mode.hpp"
#include "pg/errors.hpp"
#include "pg/pool_options.hpp"
#include "relay/outbox_row.hpp"
#include "relay/settlement.hpp"

namespace boost::asio {
class io_context;
}
namespace idem::pg {
class Pool;
}

namespace idem::relay {

struct Backlog {
  std::int64_t waiting = 0;        // unpublished, not parked
  std::int64_t parked = 0;         // dead letters
  std::int64_t oldest_age_ms = 0;  // age of the oldest waiting row; 0 when none
};

class OutboxSource {
 public:
  using ClaimHandler = std::function<void(pg::PgError, std::vector<OutboxRow>)>;
  using CountHandler = std::function<void(pg::PgError, std::size_t rows)>;
  using BacklogHandler = std::function<void(pg::PgError, Backlog)>;

  OutboxSource(boost::asio::io_context& io, pg::PoolOptions options);
  ~OutboxSource();
  OutboxSource(const OutboxSource&) = delete;
  OutboxSource& operator=(const OutboxSource&) = delete;

  void start();
  void stop();
  bool connected() const;

  // Up to `limit` rows (sorted by id) now leased to `token` for `lease`; see sql::kClaim.
  void claim(std::size_t limit, const std::string& token, std::chrono::milliseconds lease, ClaimHandler handler);
  // One statement for the whole batch (sql::kSettle: it re-versions every lane of the rows, from
  // each settlement's `lane`); `rows` counts the rows still held by `token` (fewer means the lease
  // was lost and another claim owns them now).
  void settle(const std::string& token, const std::vector<RowSettlement>& settlements, CountHandler handler);
  // Hands back whatever is still leased to `token` (a claim whose reply was lost); `rows` counts
  // the rows released. See sql::kReleaseClaim.
  void release_claim(const std::string& token, CountHandler handler);
  void delete_published(std::chrono::milliseconds older_than, std::size_t limit, CountHandler handler);
  void backlog(BacklogHandler handler);
  // Waiting rows held behind parked rows (sql::kHeldBehindParked).
  void held_behind_parked(std::function<void(pg::PgError, std::int64_t rows)> handler);
  // synchronous_commit and synchronous_standby_names (pg/replication_watch.hpp).
  void replication_settings(std::function<void(pg::PgError, core::ReplicationSettings)> handler);

 private:
  std::shared_ptr<pg::Pool> pool_;
};

}  // namespace idem::relay
