#pragma once
// A small Prometheus metrics registry: counters and histograms with labels, plus gauges read
// from callbacks at scrape time. Updates are lock-free (relaxed atomics); creating a labelled
// child takes a lock once, and the returned reference stays valid for the registry's life, so
// hot paths look a child up once and keep it. render() produces the text exposition format 0.0.4.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace idem::metrics {

using LabelValues = std::vector<std::string>;

class Counter {
 public:
  void inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Histogram {
 public:
  explicit Histogram(const std::vector<double>& bounds);  // upper bounds in seconds, ascending
  void observe_seconds(double seconds);
  void observe_micros(std::int64_t micros) { observe_seconds(static_cast<double>(micros) / 1e6); }

 private:
  friend class Registry;
  const std::vector<double>& bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // per bound, not cumulative; last = +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_nanos_{0};
};

// Seconds: 100 µs .. 10 s, suited to proxy and database latencies.
const std::vector<double>& latency_buckets();

class Registry {
 public:
  void add_counter(std::string name, std::string help, std::vector<std::string> label_names);
  void add_histogram(std::string name, std::string help, std::vector<std::string> label_names,
                     const std::vector<double>& bounds = latency_buckets());
  // A gauge (or a counter kept elsewhere, with type "counter") read at scrape time.
  void add_callback(std::string name, std::string help, std::string type, std::function<double()> read);

  // The family must have been added; `labels` match its label names in number and order.
  Counter& counter(std::string_view name, const LabelValues& labels = {});
  Histogram& histogram(std::string_view name, const LabelValues& labels = {});

  std::string render() const;

 private:
  struct Family {
    std::string name;
    std::string help;
    std::string type;  // counter | histogram | gauge
    std::vector<std::string> label_names;
    const std::vector<double>* bounds = nullptr;
    std::function<double()> read;
    std::map<LabelValues, std::unique_ptr<Counter>> counters;
    std::map<LabelValues, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(std::string_view name);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Family>> families_;  // in registration order
};

}  // namespace idem::metrics
