#include "relay/relay_fixture.hpp"

#include <iostream>
#include <utility>
#include <vector>

#include "support/eventually.hpp"
#include "support/random_hex.hpp"
#include "support/redis_client.hpp"

namespace idem::test::relay {

void RelayFixture::SetUp() {
  switch (database_) {
    case RelayDatabase::suite: schema_ = std::make_unique<OutboxSchema>("relay"); break;
    case RelayDatabase::private_cluster:
      postgres_ = std::make_unique<PrivatePostgres>();
      schema_ = std::make_unique<OutboxSchema>("relay", postgres_->dsn());
      break;
  }
  dir_ = std::make_unique<TempDir>("idem-relay");
  prefix_ = "t" + random_hex(10);
  settings_.dsn = schema_->dsn();
  settings_.redis_port = suite_redis_port();
  settings_.stream_prefix = prefix_;
  redis_ = std::make_unique<RedisClient>(suite_redis_port());
}

void RelayFixture::TearDown() {
  if (HasFailure() && postgres_) std::cerr << postgres_->log_tail();
  if (!redis_) return;
  // Drop this test's streams and markers from the shared server.
  std::vector<std::string> del = {"DEL"};
  for (std::string& key : redis_->keys(prefix_ + "*")) del.push_back(std::move(key));
  if (del.size() > 1) redis_->command(del);
}

std::int64_t RelayFixture::unpublished() {
  return schema_->client().scalar_int("SELECT count(*) FROM outbox WHERE published_at IS NULL");
}

bool RelayFixture::drained(std::chrono::milliseconds timeout) {
  return eventually([&] { return unpublished() == 0; }, timeout);
}

}  // namespace idem::test::relay
