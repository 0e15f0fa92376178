#pragma once
// Deletes expired records in small batches on an interval (the janitor). One per process, on one
// worker's io thread. Several processes reaping at once is safe: the store skips rows another
// sweeper holds, and each statement touches at most `batch` rows through the expiry index.
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>

#include "config/config.hpp"
#include "store/store.hpp"

namespace idem::store {

class Reaper {
 public:
  Reaper(boost::asio::io_context& io, store::Store& store, config::ReaperConfig config);
  void start();  // no-op when the interval is 0
  void stop();   // call on the io thread; the loop ends at its next step
  std::uint64_t deleted_total() const { return deleted_total_.load(std::memory_order_relaxed); }
  // Sweeps the store refused or did not answer (each logged as reaper_failed).
  std::uint64_t failures_total() const { return failures_total_.load(std::memory_order_relaxed); }

 private:
  boost::asio::awaitable<void> loop();

  boost::asio::io_context& io_;
  store::Store& store_;
  config::ReaperConfig config_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  std::atomic<std::uint64_t> deleted_total_{0};
  std::atomic<std::uint64_t> failures_total_{0};
};

}  // namespace idem::store
