#pragma once
// Deletes expired records in small batches on an interval (the janitor). One per process, on one
// worker's io thread. Several processes reaping at once is safe: the store skips rows another
// sweeper holds, and each statement touches at most `batch` rows through the expiry index.
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "store/store.hpp"

namespace idem::store {

struct ReaperOptions {
  std::chrono::milliseconds interval{30'000};  // between sweeps; 0: this process does not reap
  std::size_t batch = 500;                     // rows per statement; batches repeat while full
};

class Reaper {
 public:
  Reaper(boost::asio::io_context& io, store::Store& store, ReaperOptions options);
  void start();  // no-op when the interval is 0
  void stop();   // call on the io thread; the loop ends at its next step
  std::uint64_t deleted_total() const { return deleted_total_.load(std::memory_order_relaxed); }
  // Sweeps the store refused or did not answer (each logged as reaper_failed).
  std::uint64_t failures_total() const { return failures_total_.load(std::memory_order_relaxed); }

 private:
  boost::asio::awaitable<void> loop();

  boost::asio::io_context& io_;
  store::Store& store_;
  ReaperOptions options_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  std::atomic<std::uint64_t> deleted_total_{0};
  std::atomic<std::uint64_t> failures_total_{0};
};

}  // namespace idem::store
