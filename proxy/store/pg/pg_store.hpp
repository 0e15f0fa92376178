#pragma once
// Store over PostgreSQL through libpq's asynchronous API, driven by one io_context.
// Owns a bounded pool of nonblocking connections on that io_context; nothing here blocks the
// io thread (connect via PQconnectStart/PQconnectPoll, statements via PQsendQueryPrepared or
// PQsendQueryParams + PQflush + PQconsumeInput on socket readiness, a deadline on every step).
#include <functional>
#include <memory>

#include "core/replication_mode.hpp"
#include "pg/errors.hpp"
#include "pg/pool_options.hpp"
#include "store/store.hpp"

namespace boost::asio { class io_context; }

namespace idem::store::pg {

class PgStore final : public Store {
 public:
  // Must be constructed, used and destroyed on the thread running `io`.
  PgStore(boost::asio::io_context& io, idem::pg::PoolOptions options);
  ~PgStore() override;
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;

  void start();  // begins connecting the pool (returns at once; reconnects with backoff forever)
  void stop();   // closes every connection; pending and later operations fail with `unavailable`
  bool connected() const;  // at least one pooled connection is up (readiness)
  // The server's replication settings through this store's pool (pg/replication_watch.hpp).
  void read_replication_settings(std::function<void(idem::pg::PgError, core::ReplicationSettings)> handler);

  void claim(const ClaimRequest& request, ClaimHandler handler) override;
  void complete(const CompleteRequest& request, DoneHandler handler) override;
  void release(const ReleaseRequest& request, DoneHandler handler) override;
  void mark_unknown(const ReleaseRequest& request, DoneHandler handler) override;
  void force_release(const RecordKey& key, ForceReleaseHandler handler) override;
  void sweep_expired(std::size_t batch, SweepHandler handler) override;
  void inspect(const RecordKey& key, InspectHandler handler) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace idem::store::pg
