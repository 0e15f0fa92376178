#include "store/reaper.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "store/store_awaitable.hpp"
#include "log/log.hpp"

namespace idem::store {
namespace asio = boost::asio;

namespace {
// Bounds one tick's work, so a huge backlog is worked off over several ticks instead of one
// long burst of deletes.
constexpr int kMaxBatchesPerTick = 20;
}  // namespace

Reaper::Reaper(asio::io_context& io, store::Store& store, ReaperOptions options)
    : io_(io), store_(store), options_(options), timer_(io) {}

void Reaper::start() {
  if (options_.interval.count() == 0) return;
  asio::co_spawn(io_, loop(), asio::detached);
}

void Reaper::stop() {
  stopped_ = true;
  timer_.cancel();
}

asio::awaitable<void> Reaper::loop() {
  while (!stopped_) {
    timer_.expires_after(options_.interval);
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    std::size_t deleted_this_tick = 0;
    for (int batch = 0; batch < kMaxBatchesPerTick && !stopped_; ++batch) {
      auto [error, deleted] = co_await async_sweep_expired(store_, options_.batch, asio::use_awaitable);
      if (error != store::StoreError::ok) {
        failures_total_.fetch_add(1, std::memory_order_relaxed);
        log::warn("reaper_failed", {{"error", store::store_error_name(error)}});
        break;
      }
      deleted_this_tick += deleted;
      deleted_total_.fetch_add(deleted, std::memory_order_relaxed);
      if (deleted < options_.batch) break;
    }
    if (deleted_this_tick > 0) log::info("reaper_deleted", {{"records", deleted_this_tick}});
  }
}

}  // namespace idem::store
