#pragma once
// What the Postgres integration tests share: the DSN, a migrated schema, a bounded io loop and
// fresh names. The blocking client for playing "another client" and the DSN edits are
// support/blocking_pg's.
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "store/pg/pg_store.hpp"
#include "store/store.hpp"
#include "support/blocking_pg.hpp"

namespace idem::test {

// Fails the test (never skips) when IDEMPROXY_TEST_PG_DSN is unset; migrates once per process.
class PgTest : public ::testing::Test {
 protected:
  void SetUp() override;
  const std::string& dsn() const { return dsn_; }

 private:
  std::string dsn_;
};

// Runs `io` until `done()` or the deadline; true when done.
bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds deadline = std::chrono::seconds(20));

std::string fresh_name(const std::string& prefix);  // prefix + 16 random hex digits

store::ClaimRequest claim_request(const std::string& scope, const std::string& key, const std::string& owner);

// A loopback port with nothing listening on it (bound, read back, closed).
int closed_port();

}  // namespace idem::test
