#include "core/exchange_timing.hpp"

namespace idem::core {

ExchangeBudget longest_exchange(const ExchangeTimeouts& timeouts) {
  ExchangeBudget budget;
  budget.terms = {
      {"store.postgres.query_timeout", 2, timeouts.store_query},                    // the claim's reply, the completion
      {"store.postgres.acquire_timeout", 1, timeouts.store_acquire},                // the completion's connection
      {timeouts.connect_setting, timeouts.upstream_tls ? 2 : 1, timeouts.connect},  // TCP (+ TLS)
      {timeouts.upstream_setting, 1, timeouts.upstream},
  };
  for (const BudgetTerm& term : budget.terms) budget.total += term.count * term.each;
  return budget;
}

std::chrono::milliseconds minimum_lease(const ExchangeBudget& budget) { return budget.total + kLeaseMargin; }

std::chrono::milliseconds default_drain_timeout(const ExchangeBudget& budget) { return minimum_lease(budget); }

}  // namespace idem::core
