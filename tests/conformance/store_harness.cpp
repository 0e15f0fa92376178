#include "conformance/store_harness.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "crypto/keyring.hpp"
#include "integration/pg_private_schema.hpp"
#include "store/encrypting_store.hpp"
#include "store/memory_store.hpp"
#include "store/sealed_record.hpp"
#include "store/pg/pg_store.hpp"
#include "support/blocking_pg.hpp"
#include "support/random_hex.hpp"

namespace idem::test {
namespace {

constexpr std::chrono::seconds kOperationDeadline{10};

}  // namespace

StoreHarness::~StoreHarness() = default;

store::Store& StoreHarness::store() {
  if (!keyring_) return backend();
  // Built on first use: a backend may only exist after set_up(), and be replaced by another.
  store::Store& inner = backend();
  if (!encrypting_ || encrypted_backend_ != &inner) {
    encrypting_ = store::make_encrypting_store(inner, keyring_);
    encrypted_backend_ = &inner;
  }
  return *encrypting_;
}

void StoreHarness::encrypt_with(std::shared_ptr<const crypto::Keyring> keyring) {
  keyring_ = std::move(keyring);
  encrypting_.reset();
}

std::size_t StoreHarness::stored_body_bytes(const core::StoredResponse& response) const {
  return keyring_ ? store::sealed_body_size(response) : response.body.size();
}

std::shared_ptr<const crypto::Keyring> conformance_keyring() {
  crypto::AeadKey first{};
  crypto::AeadKey second{};
  for (std::size_t i = 0; i < first.size(); ++i) {
    first[i] = static_cast<std::uint8_t>(0x40 + i);
    second[i] = static_cast<std::uint8_t>(0x90 + i);
  }
  return std::make_shared<const crypto::Keyring>(
      "conformance-k2", std::vector<crypto::Keyring::Entry>{{"conformance-k1", first}, {"conformance-k2", second}});
}

ClaimOutcome StoreHarness::claim(const store::ClaimRequest& request) {
  // Shared with the handler: should it run after a failed wait, it must not touch a dead frame.
  auto outcome = std::make_shared<std::optional<ClaimOutcome>>();
  store().claim(request, [outcome](store::StoreError error, core::ClaimResult result) {
    *outcome = ClaimOutcome{error, std::move(result)};
  });
  if (!run_until([&] { return outcome->has_value(); })) {
    ADD_FAILURE() << "claim handler did not run within the deadline";
    return {};
  }
  return std::move(**outcome);
}

store::StoreError StoreHarness::complete(const store::CompleteRequest& request) {
  auto outcome = std::make_shared<std::optional<store::StoreError>>();
  store().complete(request, [outcome](store::StoreError error) { *outcome = error; });
  if (!run_until([&] { return outcome->has_value(); })) {
    ADD_FAILURE() << "complete handler did not run within the deadline";
    return store::StoreError::internal;
  }
  return **outcome;
}

store::StoreError StoreHarness::release(const store::ReleaseRequest& request) {
  auto outcome = std::make_shared<std::optional<store::StoreError>>();
  store().release(request, [outcome](store::StoreError error) { *outcome = error; });
  if (!run_until([&] { return outcome->has_value(); })) {
    ADD_FAILURE() << "release handler did not run within the deadline";
    return store::StoreError::internal;
  }
  return **outcome;
}

store::StoreError StoreHarness::mark_unknown(const store::ReleaseRequest& request) {
  auto outcome = std::make_shared<std::optional<store::StoreError>>();
  store().mark_unknown(request, [outcome](store::StoreError error) { *outcome = error; });
  if (!run_until([&] { return outcome->has_value(); })) {
    ADD_FAILURE() << "mark_unknown handler did not run within the deadline";
    return store::StoreError::internal;
  }
  return **outcome;
}

store::StoreError StoreHarness::force_release(const store::RecordKey& key) {
  auto outcome = std::make_shared<std::optional<store::StoreError>>();
  store().force_release(key, [outcome, this](store::StoreError error, std::chrono::milliseconds lease_left) {
    *outcome = error;
    last_lease_left_ = lease_left;
  });
  if (!run_until([&] { return outcome->has_value(); })) {
    ADD_FAILURE() << "force_release handler did not run within the deadline";
    return store::StoreError::internal;
  }
  return **outcome;
}

SweepOutcome StoreHarness::sweep_expired(std::size_t batch) {
  auto outcome = std::make_shared<std::optional<SweepOutcome>>();
  store().sweep_expired(batch, [outcome](store::StoreError error, std::size_t deleted) {
    *outcome = SweepOutcome{error, deleted};
  });
  if (!run_until([&] { return outcome->has_value(); })) {
    ADD_FAILURE() << "sweep_expired handler did not run within the deadline";
    return {};
  }
  return **outcome;
}

InspectOutcome StoreHarness::inspect(const store::RecordKey& key) {
  auto outcome = std::make_shared<std::optional<InspectOutcome>>();
  store().inspect(key, [outcome](store::StoreError error, store::RecordInfo info) {
    *outcome = InspectOutcome{error, std::move(info)};
  });
  if (!run_until([&] { return outcome->has_value(); })) {
    ADD_FAILURE() << "inspect handler did not run within the deadline";
    return {};
  }
  return std::move(**outcome);
}

MemoryHarness::MemoryHarness() : store_(std::make_unique<store::MemoryStore>(clock_)) {}
MemoryHarness::~MemoryHarness() = default;
store::Store& MemoryHarness::backend() { return *store_; }

std::size_t MemoryHarness::records_held() { return store_->size(); }

bool MemoryHarness::holds(const store::RecordKey& key) { return store_->contains(key); }

PgHarness::PgHarness(bool prepared_statements) : prepared_statements_(prepared_statements) {}

PgHarness::~PgHarness() { tear_down(); }

void PgHarness::set_up() {
  const char* dsn = std::getenv("IDEMPROXY_TEST_PG_DSN");
  if (dsn == nullptr || *dsn == '\0') {
    GTEST_FAIL() << "IDEMPROXY_TEST_PG_DSN is not set: the Postgres conformance tests need a real server "
                    "(e.g. IDEMPROXY_TEST_PG_DSN='host=127.0.0.1 port=55432 user=postgres dbname=postgres')";
  }
  schema_ = std::make_unique<PrivateSchema>(dsn, "conformance");
  ASSERT_TRUE(schema_->ok()) << schema_->error();

  io_ = std::make_unique<boost::asio::io_context>(1);
  store_ = std::make_unique<store::pg::PgStore>(
      *io_, pg::PoolOptions{.dsn = schema_->dsn(),
                                   .size = 2,
                                   .connect_timeout = std::chrono::seconds(5),
                                   .query_timeout = std::chrono::seconds(5),
                                   .acquire_timeout = std::chrono::seconds(5),
                                   .prepared_statements = prepared_statements_});
  store_->start();
  ASSERT_TRUE(run_until([this] { return store_->connected(); })) << "no connection to " << dsn;
}

void PgHarness::tear_down() {
  if (store_) {
    store_->stop();
    store_.reset();
    io_->restart();
    io_->poll();  // handlers posted by stop()
  }
  schema_.reset();  // drops the schema
}

store::Store& PgHarness::backend() { return *store_; }

const std::string& PgHarness::dsn() const { return schema_->dsn(); }

std::optional<std::size_t> PgHarness::count_rows(const std::string& where, const std::vector<std::string>& params) {
  try {
    return static_cast<std::size_t>(
        BlockingPg(schema_->dsn()).scalar_int("SELECT count(*) FROM idempotency_records WHERE " + where, params));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "count_rows: " << e.what();
    return std::nullopt;
  }
}

std::size_t PgHarness::records_held() { return count_rows("true", {}).value_or(0); }

bool PgHarness::holds(const store::RecordKey& key) {
  return count_rows("scope = $1 AND key = $2", {key.scope, key.key}).value_or(0) == 1;
}

void PgHarness::let_time_pass(std::chrono::milliseconds duration) { std::this_thread::sleep_for(duration); }

bool PgHarness::run_until(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + kOperationDeadline;
  io_->restart();
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    io_->run_one_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string fresh_scope(const std::string& prefix) { return prefix + "-" + random_hex(16); }

}  // namespace idem::test
