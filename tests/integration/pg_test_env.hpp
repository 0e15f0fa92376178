#pragma once
// What the Postgres integration tests share: the DSN, a migrated schema, a bounded io loop,
// fresh names, and a plain blocking libpq connection for playing "another client".
#include <libpq-fe.h>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pg/handles.hpp"
#include "store/pg/pg_store.hpp"
#include "store/store.hpp"

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

// `dsn` with one keyword replaced or added (key=value form; URIs are parsed too).
std::string dsn_with(const std::string& dsn, const std::string& keyword, const std::string& value);

// A loopback port with nothing listening on it (bound, read back, closed).
int closed_port();

// Blocking libpq connection: the test thread plays a second client with it.
class BlockingClient {
 public:
  explicit BlockingClient(const std::string& dsn);
  ~BlockingClient();
  BlockingClient(const BlockingClient&) = delete;
  BlockingClient& operator=(const BlockingClient&) = delete;

  bool ok() const;
  std::string error() const;
  // Runs one statement with text parameters; nullopt on failure (see error()).
  // On success: the rows' first column as text (empty for commands).
  std::optional<std::vector<std::string>> exec(const std::string& sql, const std::vector<std::string>& params = {});

 private:
  pg::ConnHandle connection_;
  std::string last_error_;
};

}  // namespace idem::test
