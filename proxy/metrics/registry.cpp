#include "metrics/registry.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace idem::metrics {
namespace {

void append_escaped_label(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
}

void append_number(std::string& out, double value) {
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  // Shortest round-trip form: bucket labels read le="0.1", which is what PromQL selectors match.
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);
  out.append(text, result.ptr);
}

// name{a="x",b="y"[,extra]} — `extra` is a preformatted label pair (the histogram's le).
void append_series(std::string& out, std::string_view name, const std::vector<std::string>& label_names,
                   const LabelValues& values, std::string_view extra = {}) {
  out += name;
  if (label_names.empty() && extra.empty()) return;
  out.push_back('{');
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += label_names[i];
    out += "=\"";
    append_escaped_label(out, values[i]);
    out.push_back('"');
  }
  if (!extra.empty()) {
    if (!label_names.empty()) out.push_back(',');
    out += extra;
  }
  out.push_back('}');
}

}  // namespace

const std::vector<double>& latency_buckets() {
  static const std::vector<double> bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                             0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return bounds;
}

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), buckets_(new std::atomic<std::uint64_t>[bounds.size() + 1]) {
  for (std::size_t i = 0; i <= bounds.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe_seconds(double seconds) {
  std::size_t bucket = 0;
  while (bucket < bounds_.size() && seconds > bounds_[bucket]) ++bucket;
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(static_cast<std::uint64_t>(std::max(0.0, seconds) * 1e9), std::memory_order_relaxed);
}

void Registry::add_counter(std::string name, std::string help, std::vector<std::string> label_names) {
  std::lock_guard lock(mutex_);
  families_.push_back(std::make_unique<Family>(
      Family{std::move(name), std::move(help), "counter", std::move(label_names), nullptr, {}, {}, {}}));
}

void Registry::add_histogram(std::string name, std::string help, std::vector<std::string> label_names,
                             const std::vector<double>& bounds) {
  std::lock_guard lock(mutex_);
  families_.push_back(std::make_unique<Family>(
      Family{std::move(name), std::move(help), "histogram", std::move(label_names), &bounds, {}, {}, {}}));
}

void Registry::add_callback(std::string name, std::string help, std::string type, std::function<double()> read) {
  std::lock_guard lock(mutex_);
  families_.push_back(std::make_unique<Family>(
      Family{std::move(name), std::move(help), std::move(type), {}, nullptr, std::move(read), {}, {}}));
}

Registry::Family& Registry::family(std::string_view name) {
  for (auto& family : families_) {
    if (family->name == name) return *family;
  }
  throw std::logic_error("metric family not registered: " + std::string(name));
}

Counter& Registry::counter(std::string_view name, const LabelValues& labels) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  auto& child = f.counters[labels];
  if (!child) child = std::make_unique<Counter>();
  return *child;
}

Histogram& Registry::histogram(std::string_view name, const LabelValues& labels) {
  std::lock_guard lock(mutex_);
  Family& f = family(name);
  auto& child = f.histograms[labels];
  if (!child) child = std::make_unique<Histogram>(*f.bounds);
  return *child;
}

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(8192);
  for (const auto& f : families_) {
    out += "# HELP " + f->name + " " + f->help + "\n";
    out += "# TYPE " + f->name + " " + f->type + "\n";
    if (f->read) {
      out += f->name + " ";
      append_number(out, f->read());
      out.push_back('\n');
      continue;
    }
    for (const auto& [labels, counter] : f->counters) {
      append_series(out, f->name, f->label_names, labels);
      out += " " + std::to_string(counter->value()) + "\n";
    }
    for (const auto& [labels, histogram] : f->histograms) {
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i <= f->bounds->size(); ++i) {
        cumulative += histogram->buckets_[i].load(std::memory_order_relaxed);
        std::string le = "le=\"";
        if (i < f->bounds->size())
          append_number(le, (*f->bounds)[i]);
        else
          le += "+Inf";
        le += "\"";
        append_series(out, f->name + "_bucket", f->label_names, labels, le);
        out += " " + std::to_string(cumulative) + "\n";
      }
      append_series(out, f->name + "_sum", f->label_names, labels);
      out.push_back(' ');
      append_number(out, static_cast<double>(histogram->sum_nanos_.load(std::memory_order_relaxed)) / 1e9);
      out.push_back('\n');
      append_series(out, f->name + "_count", f->label_names, labels);
      out += " " + std::to_string(histogram->count_.load(std::memory_order_relaxed)) + "\n";
    }
  }
  return out;
}

}  // namespace idem::metrics
