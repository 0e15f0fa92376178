// The timing model's arithmetic: what each timeout adds to the longest exchange.
#include <gtest/gtest.h>

#include "core/exchange_timing.hpp"

namespace idem::core {
namespace {

using namespace std::chrono_literals;

// The shipped defaults: query 2s, acquire 1s, connect 1s, upstream 30s.
const ExchangeTimeouts kDefaults{.store_query = 2s, .store_acquire = 1s, .connect = 1s, .upstream_tls = false, .upstream = 30s};

TEST(ExchangeTiming, TheDefaultsGiveA36SecondExchangeAndA37SecondMinimumLease) {
  const ExchangeBudget budget = longest_exchange(kDefaults);
  EXPECT_EQ(budget.total, 36s);  // claim reply 2s + connect 1s + upstream 30s + acquire 1s + completion 2s
  EXPECT_EQ(minimum_lease(budget), 37s);
  EXPECT_EQ(default_drain_timeout(budget), 37s);
  std::chrono::milliseconds sum{0};
  for (const BudgetTerm& term : budget.terms) sum += term.count * term.each;
  EXPECT_EQ(sum, budget.total) << "the terms a message prints must add up to the total";
}

TEST(ExchangeTiming, AnHttpsUpstreamCountsTheHandshakeAsASecondConnect) {
  ExchangeTimeouts tls = kDefaults;
  tls.upstream_tls = true;
  EXPECT_EQ(longest_exchange(tls).total, 37s);
}

TEST(ExchangeTiming, EveryTimeoutCountsAsOftenAsAnExchangeCanSpendIt) {
  const auto total = [](ExchangeTimeouts timeouts) { return longest_exchange(timeouts).total; };
  const auto base = total(kDefaults);
  ExchangeTimeouts changed = kDefaults;
  changed.store_query += 1s;
  EXPECT_EQ(total(changed) - base, 2s) << "the claim's reply and the completion";
  changed = kDefaults;
  changed.store_acquire += 1s;
  EXPECT_EQ(total(changed) - base, 1s) << "the completion's connection";
  changed = kDefaults;
  changed.connect += 1s;
  EXPECT_EQ(total(changed) - base, 1s) << "TCP; a replaced stale connection shares the response deadline";
  changed = kDefaults;
  changed.upstream += 1s;
  EXPECT_EQ(total(changed) - base, 1s);
}

}  // namespace
}  // namespace idem::core
