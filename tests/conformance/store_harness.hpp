#pragma once
// Runs Store operations to completion for the conformance suite, one backend per harness.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "store/store.hpp"
#include "support/manual_clock.hpp"

namespace boost::asio { class io_context; }
namespace idem::crypto { class Keyring; }
namespace idem::store { class MemoryStore; }
namespace idem::store::pg { class PgStore; }

namespace idem::test {

class PrivateSchema;

struct ClaimOutcome {
  store::StoreError error = store::StoreError::internal;
  core::ClaimResult result;
};

struct SweepOutcome {
  store::StoreError error = store::StoreError::internal;
  std::size_t deleted = 0;
};

struct InspectOutcome {
  store::StoreError error = store::StoreError::internal;
  store::RecordInfo info;
};

class StoreHarness {
 public:
  virtual ~StoreHarness();

  // Called from the fixture's SetUp; a fatal gtest failure here skips the test body.
  virtual void set_up() = 0;
  virtual void tear_down() {}
  // The store under test: the backend, or an EncryptingStore over it after encrypt_with().
  store::Store& store();
  // From now on every operation goes through an EncryptingStore over the backend holding
  // `keyring` (called again: a new decorator, as a process restarted with other keys would have).
  // nullptr: straight to the backend again (to see what it holds).
  void encrypt_with(std::shared_ptr<const crypto::Keyring> keyring);
  bool encrypted() const { return keyring_ != nullptr; }
  // What inspect() reports as body_bytes for a record completed with `response`.
  std::size_t stored_body_bytes(const core::StoredResponse& response) const;
  // Lets `duration` pass as the store sees time: a hand-driven clock, or a real sleep.
  virtual void let_time_pass(std::chrono::milliseconds duration) = 0;

  // Each runs one operation until its handler has run; a handler that does not run within the
  // harness deadline is a test failure (and the result then says `internal`).
  ClaimOutcome claim(const store::ClaimRequest& request);
  store::StoreError complete(const store::CompleteRequest& request);
  store::StoreError release(const store::ReleaseRequest& request);
  store::StoreError mark_unknown(const store::ReleaseRequest& request);
  store::StoreError force_release(const store::RecordKey& key);
  // The lease force_release reported left, with lease_running.
  std::chrono::milliseconds last_lease_left() const { return last_lease_left_; }
  SweepOutcome sweep_expired(std::size_t batch);
  InspectOutcome inspect(const store::RecordKey& key);

  // What the store physically holds, expired records included (what no sweep deleted yet).
  // Each test has the store to itself (Postgres: a private schema), so sweeps count only its own.
  virtual std::size_t records_held() = 0;
  virtual bool holds(const store::RecordKey& key) = 0;

 protected:
  // Drives the backend until `done()` holds or the deadline passes; true when done.
  virtual bool run_until(const std::function<bool()>& done) = 0;
  virtual store::Store& backend() = 0;

 private:
  std::shared_ptr<const crypto::Keyring> keyring_;
  std::unique_ptr<store::Store> encrypting_;
  const store::Store* encrypted_backend_ = nullptr;  // the backend `encrypting_` wraps
  std::chrono::milliseconds last_lease_left_{0};
};

class MemoryHarness : public StoreHarness {
 public:
  MemoryHarness();
  ~MemoryHarness() override;
  void set_up() override {}
  void let_time_pass(std::chrono::milliseconds duration) override { clock_.advance(duration); }
  std::size_t records_held() override;
  bool holds(const store::RecordKey& key) override;

 protected:
  bool run_until(const std::function<bool()>& done) override { return done(); }  // handlers run inline
  store::Store& backend() override;

 private:
  ManualClock clock_;
  std::unique_ptr<store::MemoryStore> store_;
};

// Postgres with named prepared statements (idemproxy's default); PgUnnamedHarness below with
// them off (as behind an older transaction-mode PgBouncer).
class PgHarness : public StoreHarness {
 public:
  explicit PgHarness(bool prepared_statements = true);
  ~PgHarness() override;
  void set_up() override;  // needs IDEMPROXY_TEST_PG_DSN; a migrated schema of the test's own
  void tear_down() override;
  void let_time_pass(std::chrono::milliseconds duration) override;
  std::size_t records_held() override;  // blocking queries on a connection of their own
  bool holds(const store::RecordKey& key) override;
  // The private schema's DSN, for tests that read or alter rows with a client of their own.
  const std::string& dsn() const;

 protected:
  bool run_until(const std::function<bool()>& done) override;
  store::Store& backend() override;

 private:
  // The count of rows matching `where` (with text parameters), or a test failure and nullopt.
  std::optional<std::size_t> count_rows(const std::string& where, const std::vector<std::string>& params);

  bool prepared_statements_;
  std::unique_ptr<PrivateSchema> schema_;
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<store::pg::PgStore> store_;
};

class PgUnnamedHarness final : public PgHarness {
 public:
  PgUnnamedHarness() : PgHarness(false) {}
};

// The keys the encrypted backends of the conformance suite seal with (fixed test keys).
std::shared_ptr<const crypto::Keyring> conformance_keyring();

// A backend harness whose every operation goes through an EncryptingStore: the whole Store
// contract must hold unchanged through the decorator.
template <class Backend>
class Encrypted final : public Backend {
 public:
  Encrypted() { this->encrypt_with(conformance_keyring()); }
};

// A scope no other test (or earlier run) has used.
std::string fresh_scope(const std::string& prefix);

}  // namespace idem::test
