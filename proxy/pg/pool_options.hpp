#pragma once
// How a Pool connects and how long it waits (pool.hpp). Kept apart from the pool so that those
// who only configure one need no Asio.
#include <chrono>
#include <cstddef>
#include <string>

namespace idem::pg {

struct PoolOptions {
  std::string dsn;
  std::size_t size = 4;  // connections held by this pool
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds query_timeout{2'000};    // deadline per statement
  std::chrono::milliseconds acquire_timeout{1'000};  // wait for a free connection, then `unavailable`
  // Named prepared statements per connection (parsed and planned once per session; connection.hpp).
  // Off here, so that a pool made without saying keeps working behind any pooler; idemproxy turns
  // it on from store.postgres.prepared_statements (default true).
  bool prepared_statements = false;
};

}  // namespace idem::pg
