#pragma once
// gtest fixture of the failure tests: a ProxyRig (and, for tests that stop Postgres, a private
// cluster) started by the test with the options it needs, and their logs printed when it fails.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>

#include "failure/proxy_rig.hpp"
#include "support/private_postgres.hpp"

namespace idem::test::failure {

class FailureTest : public ::testing::Test {
 protected:
  // Starts the rig (throws with the logs when it does not come up: the test fails).
  ProxyRig& start_rig(RigOptions options = {}) {
    rig_ = std::make_unique<ProxyRig>(std::move(options));
    rig_->start();
    return *rig_;
  }

  PrivatePostgres& start_private_postgres(CommitMode commit_mode = CommitMode::synchronous) {
    postgres_ = std::make_unique<PrivatePostgres>(commit_mode);
    return *postgres_;
  }

  void TearDown() override {
    if (!HasFailure()) return;
    if (rig_) std::cerr << rig_->diagnostics();
    if (postgres_) std::cerr << postgres_->log_tail();
  }

  // Declared first, destroyed last: the proxy goes away before its database.
  std::unique_ptr<PrivatePostgres> postgres_;
  std::unique_ptr<ProxyRig> rig_;
};

}  // namespace idem::test::failure
