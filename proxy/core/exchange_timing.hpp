#pragma once
// The timing model: how long one exchange can hold its claim before its outcome is known, and the
// rules every route's timings must follow so that no retry starts a second execution while the
// first may still be running. Pure arithmetic over the running configuration's timeouts; the
// config reader applies it on --check, at start-up and on every reload (README "Timing").
//
// An exchange, from the moment the claim's INSERT sets the lease (the database's now()):
//   1. the claim's reply travels back: at most store query_timeout after the statement was sent;
//   2. the upstream connection: connect_timeout for TCP, and connect_timeout again for the TLS
//      handshake on an https upstream. A pooled connection found closed when written is replaced
//      within the same response deadline (upstream_pool.cpp), so it adds one connection set-up,
//      never a second `timeout`;
//   3. the request written and the response read: upstream timeout;
//   4. the completion: a store connection (acquire_timeout), then the UPDATE (query_timeout).
// The lease must outlast all four by kLeaseMargin (what no deadline of ours bounds: scheduling,
// network transit to the database); the ttl must outlast the lease; a graceful shutdown's drain
// must cover one whole exchange.
#include <chrono>
#include <string>
#include <vector>

namespace idem::core {

// The timeouts that bound an exchange, from the store section and the route's upstream in force.
// A route may set its own timeout: `upstream_setting` names where the one counted comes from.
struct ExchangeTimeouts {
  std::chrono::milliseconds store_query{0};    // store.postgres.query_timeout
  std::chrono::milliseconds store_acquire{0};  // store.postgres.acquire_timeout
  std::chrono::milliseconds connect{0};        // the upstream's connect_timeout
  bool upstream_tls = false;                   // https upstream: the handshake has its own connect_timeout
  std::chrono::milliseconds upstream{0};       // the route's timeout, else its upstream's
  std::string connect_setting = "upstream.connect_timeout";
  std::string upstream_setting = "upstream.timeout";
};

// One term of the budget: `count` × the setting named `setting` (its value `each`).
struct BudgetTerm {
  std::string setting;
  int count = 1;
  std::chrono::milliseconds each{0};
};

struct ExchangeBudget {
  std::chrono::milliseconds total{0};
  std::vector<BudgetTerm> terms;  // total is their sum, in the order an exchange spends them
};

// Time that no timeout of ours bounds (scheduling, transit to the database), added on top of the
// longest exchange before a lease is long enough.
inline constexpr std::chrono::milliseconds kLeaseMargin{1'000};

ExchangeBudget longest_exchange(const ExchangeTimeouts& timeouts);

// The shortest lease the rules allow: the longest exchange plus kLeaseMargin (a lease must be at
// least this).
std::chrono::milliseconds minimum_lease(const ExchangeBudget& budget);

// drain_timeout when the configuration does not set one: long enough for a request that started
// just before SIGTERM to finish and store its result.
std::chrono::milliseconds default_drain_timeout(const ExchangeBudget& budget);

}  // namespace idem::core
