#pragma once
// A schema of its own, for a test that needs idempotency_records to itself: a sweep deletes
// expired records of every scope, so its counts only mean something where no other test (or an
// e2e proxy's sweeper) shares the table. Created and migrated on construction, dropped with
// everything in it on destruction. Blocking libpq: test threads only.
#include <string>

namespace idem::test {

class PrivateSchema {
 public:
  // `dsn` is the server's (IDEMPROXY_TEST_PG_DSN); `prefix` names the schema (+ random hex).
  PrivateSchema(const std::string& dsn, const std::string& prefix);
  ~PrivateSchema();
  PrivateSchema(const PrivateSchema&) = delete;
  PrivateSchema& operator=(const PrivateSchema&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }  // what failed in the constructor
  const std::string& name() const { return name_; }
  // `dsn` whose sessions resolve unqualified names in this schema (search_path), for the store
  // and for plain clients alike.
  const std::string& dsn() const { return schema_dsn_; }

 private:
  std::string server_dsn_;
  std::string name_;
  std::string schema_dsn_;
  std::string error_;
  bool created_ = false;
};

}  // namespace idem::test
