// idem-bench-report: turns one bench/run.sh results file (meta, every idem-loadgen run, the wrk
// runs, pgbench, the Redis round trip) into the markdown summary (runs table with ratios against
// nginx and direct, wrk beside idem-loadgen, the targets with verdicts) and a gnuplot script
// for the latency-percentile plot; and/or one `--cost` results file (instructions per request,
// callgrind) into its own section.
//
//   idem-bench-report [--results RUN.json] [--cost COST.json] --markdown OUT.md [--gnuplot OUT.gp --svg latency.svg]
//
// Run names follow run.sh's convention "<kind>-c<connections>" (closed loop, storm) and
// "<kind>-open" (open loop); ratios compare runs of the same mode, connections and rate.
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {
namespace json = boost::json;

struct Run {
  std::string scenario;
  std::string kind;  // scenario up to the first '-'
  std::string mode;
  std::int64_t connections = 0;
  double rate = 0;
  double throughput = 0;
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;
  std::int64_t requests = 0;
  std::int64_t errors = 0;
  const json::object* raw = nullptr;
};

double number(const json::value* value) {
  if (value == nullptr) return 0;
  if (value->is_double()) return value->as_double();
  if (value->is_int64()) return static_cast<double>(value->as_int64());
  if (value->is_uint64()) return static_cast<double>(value->as_uint64());
  return 0;
}
double number_at(const json::object& object, std::string_view key) { return number(object.if_contains(key)); }
std::string text_at(const json::object& object, std::string_view key) {
  const auto* value = object.if_contains(key);
  return value != nullptr && value->is_string() ? std::string(value->as_string()) : std::string();
}
const json::object* object_at(const json::object& object, std::string_view key) {
  const auto* value = object.if_contains(key);
  return value != nullptr && value->is_object() ? &value->as_object() : nullptr;
}

Run to_run(const json::object& object) {
  Run run;
  run.raw = &object;
  run.scenario = text_at(object, "scenario");
  run.kind = run.scenario.substr(0, run.scenario.find('-'));
  run.mode = text_at(object, "mode");
  run.connections = static_cast<std::int64_t>(number_at(object, "connections"));
  run.rate = number_at(object, "rate");
  run.throughput = number_at(object, "throughput_rps");
  run.requests = static_cast<std::int64_t>(number_at(object, "requests"));
  if (const auto* errors = object_at(object, "errors")) run.errors = static_cast<std::int64_t>(number_at(*errors, "total"));
  if (const auto* latency = object_at(object, "latency_us")) {
    run.p50 = number_at(*latency, "p50");
    run.p90 = number_at(*latency, "p90");
    run.p99 = number_at(*latency, "p99");
    run.p999 = number_at(*latency, "p99_9");
    run.max = number_at(*latency, "max");
  }
  return run;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}
std::string us(double value) { return fixed(value, value >= 1000 ? 0 : 1); }
std::string ratio(double value) { return fixed(value, value < 0.1 ? 3 : 2) + "×"; }
std::string mib(double kib) { return fixed(kib / 1024.0, 1) + " MiB"; }

bool comparable(const Run& a, const Run& b) {
  return a.mode == b.mode && a.connections == b.connections && std::abs(a.rate - b.rate) < 1e-9;
}

// The first request's instructions per request before [E] (issue 17): bench/run.sh --cost on
// df8d58c (the proxy as of ba933f0), 2026-11-25. The "halve it" target is half of this.
constexpr double kFirstBaselineIr = 173565;

// 173565 -> "173,565".
std::string grouped(double value) {
  const std::string digits = fixed(value, 0);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    const std::size_t left = digits.size() - i;  // digits from here to the end
    if (i > 0 && digits[i - 1] != '-' && left % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The order scenario kinds are listed in (the cost table, wrk's table): references first.
std::size_t scenario_rank(std::string_view kind) {
  static constexpr std::string_view kOrder[] = {"direct", "nginx", "nginx-return", "passthrough", "replay",
                                                "replaydb", "replayredis", "first"};
  return static_cast<std::size_t>(std::find(std::begin(kOrder), std::end(kOrder), kind) - std::begin(kOrder));
}

// bench/run.sh --cost: instructions per request of the process serving each scenario.
std::string cost_section(const json::object& results) {
  const json::object* cost = object_at(results, "cost");
  if (cost == nullptr) return {};
  std::ostringstream out;
  const json::object* meta = object_at(results, "meta");
  out << "## Instructions per request (callgrind)\n\n";
  if (meta != nullptr) {
    out << "- " << text_at(*meta, "date") << ", commit " << text_at(*meta, "commit") << ", `bench/run.sh --cost` ("
        << number_at(*meta, "elapsed_s") << " s); " << text_at(*cost, "tool") << "\n"
        << "- " << text_at(*meta, "setup") << "\n";
  }
  out << "- Counted: every instruction of the one process serving the scenario (all its threads, user space; "
         "the kernel's work is not counted), over "
      << number_at(*cost, "requests") << " requests on one connection after " << number_at(*cost, "warmup")
      << " warm-up, divided by " << number_at(*cost, "requests")
      << ". Unlike the clock these counts repeat: the runs column shows each scenario measured twice.\n";
  if (const auto* hits = cost->if_contains("redis_hits"); hits && !hits->is_null() && cost->if_contains("redis_replays")) {
    out << "- replayredis: " << grouped(number(hits)) << " Redis hits for " << grouped(number_at(*cost, "redis_replays"))
        << " replays (warm-up included; the rest fell back to Postgres)\n";
  }
  out << "\n";
  struct Row {
    std::string scenario, process;
    double ir = 0, spread = 0;
    std::string runs;
  };
  std::vector<Row> rows;
  if (const auto* scenarios = cost->if_contains("scenarios"); scenarios && scenarios->is_array()) {
    for (const auto& value : scenarios->as_array()) {
      if (!value.is_object()) continue;
      const auto& object = value.as_object();
      Row row{text_at(object, "scenario"), text_at(object, "process"), number_at(object, "ir_per_request"),
              number_at(object, "spread_pct"), {}};
      if (const auto* runs = object.if_contains("runs"); runs && runs->is_array()) {
        for (const auto& run : runs->as_array()) row.runs += (row.runs.empty() ? "" : " / ") + grouped(number(&run));
      }
      rows.push_back(std::move(row));
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return scenario_rank(a.scenario) < scenario_rank(b.scenario); });
  auto ir_of = [&rows](std::string_view scenario) {
    for (const auto& row : rows) {
      if (row.scenario == scenario) return row.ir;
    }
    return 0.0;
  };
  const double nginx = ir_of("nginx"), nginx_return = ir_of("nginx-return");
  out << "| scenario | process counted | instructions/request | runs | spread | ÷ nginx proxy_pass | ÷ nginx return 200 |\n"
      << "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& row : rows) {
    out << "| " << row.scenario << " | " << row.process << " | " << grouped(row.ir) << " | " << row.runs << " | "
        << fixed(row.spread, 2) << "% | " << (nginx > 0 ? ratio(row.ir / nginx) : "—") << " | "
        << (nginx_return > 0 ? ratio(row.ir / nginx_return) : "—") << " |\n";
  }
  out << "\n| target (issue 17) | measured | verdict |\n| --- | --- | --- |\n";
  const double pass = ir_of("passthrough"), replay = ir_of("replay"), first = ir_of("first");
  if (pass > 0 && nginx > 0) {
    out << "| passthrough ≤ nginx proxy_pass | " << grouped(pass) << " vs " << grouped(nginx) << " = " << ratio(pass / nginx)
        << " | " << (pass <= nginx ? "met" : "**missed**: " + grouped(pass - nginx) + " too many") << " |\n";
  }
  if (replay > 0 && nginx_return > 0) {
    const double bound = nginx_return * 1.2;
    out << "| replay (local cache hit) ≤ nginx return 200 + 20% | " << grouped(replay) << " vs " << grouped(bound)
        << " | " << (replay <= bound ? "met" : "**missed**: " + ratio(replay / nginx_return) + " nginx return 200") << " |\n";
  }
  if (first > 0) {
    out << "| first request: half of the instructions outside Postgres before [E] | " << grouped(first);
    if (kFirstBaselineIr > 0) {
      out << " vs " << grouped(kFirstBaselineIr / 2) << " | "
          << (first <= kFirstBaselineIr / 2 ? "met" : "**missed**: " + ratio(first / kFirstBaselineIr) + " the baseline");
    } else {
      out << " (the baseline) | —";
    }
    out << " |\n";
  }
  if (const json::object* hot = object_at(*cost, "first_hotspots")) {
    out << "\n### First request: where its " << grouped(number_at(*hot, "ir_per_request"))
        << " instructions go (run 1)\n\n"
        << "All of them are outside Postgres: the server works in its own processes, not counted here (the client "
           "library, libpq, is: see the objects). From `callgrind_annotate`; names without directories, template "
           "arguments and parameters.\n\n";
    auto table = [&out](const json::value* rows, const char* heading, bool with_object) {
      out << "| " << heading << (with_object ? " | object" : "") << " | instructions/request | share |\n| --- |"
          << (with_object ? " --- |" : "") << " ---: | ---: |\n";
      if (rows == nullptr || !rows->is_array()) return;
      for (const auto& value : rows->as_array()) {
        if (!value.is_object()) continue;
        const auto& row = value.as_object();
        if (number_at(row, "share") < 0.1) continue;
        std::string name = text_at(row, with_object ? "function" : "object");
        for (std::size_t at = 0; (at = name.find('|', at)) != std::string::npos; at += 2) name.replace(at, 1, "\\|");
        out << "| " << (with_object ? "`" + name + "`" : name) << (with_object ? " | " + text_at(row, "object") : "")
            << " | " << grouped(number_at(row, "ir_per_request")) << " | " << fixed(number_at(row, "share"), 1) << "% |\n";
      }
      out << "\n";
    };
    out << "The project's own functions, inclusive (each with everything it calls, so rows nest):\n\n";
    table(hot->if_contains("functions"), "function (inclusive)", true);
    out << "The top functions by self cost (their own instructions only), any library:\n\n";
    table(hot->if_contains("self"), "function (self)", true);
    out << "Self cost by object:\n\n";
    table(hot->if_contains("by_object"), "object", false);
  }
  return out.str();
}

class Report {
 public:
  explicit Report(const json::object& results) : results_(results) {
    if (const auto* runs = results.if_contains("runs"); runs != nullptr && runs->is_array()) {
      for (const auto& value : runs->as_array()) {
        if (value.is_object()) runs_.push_back(to_run(value.as_object()));
      }
    }
  }

  std::string markdown() const {
    std::ostringstream out;
    const json::object* meta = object_at(results_, "meta");
    out << "# idemproxy bench: latest run\n\n";
    if (meta != nullptr) {
      out << "- date: " << text_at(*meta, "date") << " (" << text_at(*meta, "profile") << " profile)\n"
          << "- machine: " << text_at(*meta, "cpu") << ", " << number_at(*meta, "cores") << " cores, "
          << text_at(*meta, "kernel") << "\n"
          << "- load average: " << text_at(*meta, "load_before") << " before, " << text_at(*meta, "load_after")
          << " after\n"
          << "- commit: " << text_at(*meta, "commit") << "; " << text_at(*meta, "versions") << "\n"
          << "- setup: " << text_at(*meta, "setup") << "\n";
    }
    out << "\n## Runs\n\n"
        << "Latencies in µs, measured by idem-loadgen from the send (closed loop) or from the intended send "
           "time (open loop). Ratios compare with the nginx and direct runs of the same mode and connection count.\n\n"
        << "| scenario | mode | conns | req/s | p50 | p90 | p99 | p99.9 | max | errors | req/s ÷ nginx | p50 ÷ nginx "
           "| p99 ÷ nginx | p50 ÷ direct |\n"
        << "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const auto& run : runs_) {
      if (run.kind == "memory") continue;
      const Run* nginx = find_like("nginx", run);
      const Run* direct = find_like("direct", run);
      const bool closed = run.mode == "closed";
      std::string mode = run.mode;
      if (run.mode == "open") mode += " " + fixed(run.rate, 0) + "/s";
      out << "| " << run.scenario << " | " << mode << " | " << run.connections << " | " << fixed(run.throughput, 0)
          << " | " << us(run.p50) << " | " << us(run.p90) << " | " << us(run.p99) << " | " << us(run.p999) << " | "
          << us(run.max) << " | " << run.errors << " | "
          << (nginx && closed && nginx->throughput > 0 ? ratio(run.throughput / nginx->throughput) : "—") << " | "
          << (nginx && nginx->p50 > 0 ? ratio(run.p50 / nginx->p50) : "—") << " | "
          << (nginx && nginx->p99 > 0 ? ratio(run.p99 / nginx->p99) : "—") << " | "
          << (direct && direct->p50 > 0 ? ratio(run.p50 / direct->p50) : "—") << " |\n";
    }
    out << "\n" << cpu_by_process() << wrk_side_by_side() << database_and_memory() << "\n" << targets();
    return out.str();
  }

  // CPU time per request by process over each measured phase (bench/cpu_sample.sh): kernel work
  // included, which callgrind's counts leave out; and pgbench's per claim + complete pair.
  std::string cpu_by_process() const {
    static constexpr std::string_view kProcesses[] = {"idemproxy", "nginx", "upstream", "postgres", "redis", "loadgen"};
    bool any = false;
    for (const auto& run : runs_) any = any || object_at(*run.raw, "cpu_us_per_request") != nullptr;
    if (!any) return {};
    std::ostringstream out;
    out << "## CPU time per request, by process\n\n"
        << "µs of CPU (user + system, every thread; from /proc) each process used during the measured phase, "
           "divided by the requests served: unlike the instruction counts, the kernel's socket work is in it. "
           "`sum` adds the columns before it. `server ÷ nginx` compares the process serving the scenario "
           "(idemproxy; nginx; the upstream for direct) with nginx in its run of the same connections.\n\n"
        << "| scenario | idemproxy | nginx | upstream | Postgres | Redis | idem-loadgen | sum | server ÷ nginx |\n"
        << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    auto server_of = [](const Run& run) -> std::string_view {
      if (run.kind == "direct") return "upstream";
      if (run.kind == "nginx") return "nginx";
      return "idemproxy";
    };
    for (const auto& run : runs_) {
      const json::object* cpu = object_at(*run.raw, "cpu_us_per_request");
      if (cpu == nullptr || run.kind == "memory" || run.kind == "storm") continue;
      out << "| " << run.scenario;
      double sum = 0;
      for (const std::string_view process : kProcesses) {
        out << " | " << fixed(number_at(*cpu, process), 1);
        sum += number_at(*cpu, process);
      }
      const Run* nginx = find_like("nginx", run);
      const json::object* nginx_cpu = nginx ? object_at(*nginx->raw, "cpu_us_per_request") : nullptr;
      const double nginx_us = nginx_cpu ? number_at(*nginx_cpu, "nginx") : 0;
      out << " | " << fixed(sum, 1) << " | "
          << (nginx_us > 0 ? ratio(number_at(*cpu, server_of(run)) / nginx_us) : "—") << " |\n";
    }
    out << "\n";
    for (const auto& [key, mode] : {std::pair{"pgbench", "prepared"}, std::pair{"pgbench_extended", "extended"}}) {
      const json::object* pgbench = object_at(results_, key);
      const json::object* cpu = pgbench ? object_at(*pgbench, "cpu_us_per_pair") : nullptr;
      if (cpu == nullptr || number_at(*cpu, "postgres") <= 0) continue;
      const double client = number_at(*cpu, "pgbench"), server = number_at(*cpu, "postgres");
      out << "\n- pgbench -M " << mode << ", per claim + complete pair: pgbench " << fixed(client, 1) << " µs, Postgres "
          << fixed(server, 1) << " µs, sum " << fixed(client + server, 1) << " µs.";
    }
    return out.str() + "\n\n";
  }

  // wrk's runs (2 threads, 64 connections) beside idem-loadgen's runs of the same scenario at 64
  // connections, each with its ratio to its own nginx run.
  std::string wrk_side_by_side() const {
    const auto* wrk = results_.if_contains("wrk");
    if (wrk == nullptr || !wrk->is_array() || wrk->as_array().empty()) return {};
    std::vector<const json::object*> runs;
    const json::object* wrk_nginx = nullptr;
    for (const auto& value : wrk->as_array()) {
      if (!value.is_object()) continue;
      runs.push_back(&value.as_object());
      if (text_at(value.as_object(), "scenario") == "wrk-nginx") wrk_nginx = &value.as_object();
    }
    auto kind_of = [](const json::object* run) {
      const std::string scenario = text_at(*run, "scenario");
      return scenario.substr(scenario.find('-') + 1);
    };
    std::stable_sort(runs.begin(), runs.end(), [&kind_of](const json::object* a, const json::object* b) {
      return scenario_rank(kind_of(a)) < scenario_rank(kind_of(b));
    });
    const Run* loadgen_nginx = find("nginx-c64");
    std::ostringstream out;
    out << "## wrk beside idem-loadgen (64 connections)\n\n"
        << "wrk " << (runs.empty() ? 0 : number_at(*runs.front(), "threads")) << " threads, "
        << (runs.empty() ? 0 : number_at(*runs.front(), "connections")) << " connections, "
        << (runs.empty() ? 0 : number_at(*runs.front(), "duration_s"))
        << " s per run (bench/wrk/idem.lua: unique keys for first requests, one completed key for replays), "
           "right after idem-loadgen's runs at 64 connections (1 thread, closed loop). Latencies in µs. "
           "Wall-clock figures on a shared machine: compare within a run, not across runs.\n\n"
        << "| scenario | wrk req/s | wrk p50 | wrk p99 | wrk ÷ nginx | errors, upstream executions | idem-loadgen req/s | "
           "p50 | p99 | idem-loadgen ÷ nginx |\n"
        << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    const double wrk_nginx_rps = wrk_nginx ? number_at(*wrk_nginx, "throughput_rps") : 0;
    for (const json::object* run : runs) {
      const std::string kind = kind_of(run);
      const json::object* latency = object_at(*run, "latency_us");
      const double rps = number_at(*run, "throughput_rps");
      const Run* loadgen = find(kind + "-c64");
      out << "| " << kind << " | " << fixed(rps, 0) << " | " << (latency ? us(number_at(*latency, "p50")) : "—") << " | "
          << (latency ? us(number_at(*latency, "p99")) : "—") << " | "
          << (wrk_nginx_rps > 0 ? ratio(rps / wrk_nginx_rps) : "—") << " | " << number_at(*run, "errors_total") << ", "
          << number_at(*run, "executions") << " | ";
      if (loadgen) {
        out << fixed(loadgen->throughput, 0) << " | " << us(loadgen->p50) << " | " << us(loadgen->p99) << " | "
            << (loadgen_nginx && loadgen_nginx->throughput > 0 ? ratio(loadgen->throughput / loadgen_nginx->throughput) : "—")
            << " |\n";
      } else {
        out << "— | — | — | — |\n";
      }
    }
    return out.str() + "\n";
  }

  std::string gnuplot(const std::string& svg_path) const {
    struct Panel {
      std::string title;
      std::vector<const Run*> runs;
    };
    std::vector<Panel> panels{{"closed loop, 1 connection", {}}, {"closed loop, 16-256 connections", {}}, {"", {}}};
    for (const auto& run : runs_) {
      if (run.kind == "memory") continue;
      if (run.mode == "open") {
        panels[2].runs.push_back(&run);
        panels[2].title = "open loop, " + fixed(run.rate, 0) + " req/s, " + std::to_string(run.connections) + " connections";
      } else if (run.connections == 1) {
        panels[0].runs.push_back(&run);
      } else {
        panels[1].runs.push_back(&run);
      }
    }
    std::ostringstream out;
    out << "# Written by idem-bench-report: latency by percentile, one line per run.\n"
        << "set encoding utf8\n"
        << "set terminal svg size 1560,560 dynamic font 'sans,11' background '#ffffff'\n"
        << "set output '" << svg_path << "'\n";
    int block = 0;
    for (const auto& panel : panels) {
      for (const Run* run : panel.runs) {
        out << "$d" << block++ << " << EOD\n";
        if (const auto* spectrum = run->raw->if_contains("spectrum"); spectrum && spectrum->is_array()) {
          for (const auto& point : spectrum->as_array()) {
            if (!point.is_array() || point.as_array().size() != 2) continue;
            const double percentile = number(&point.as_array()[0]);
            const double latency = number(&point.as_array()[1]);
            if (percentile >= 100.0 || latency <= 0) continue;
            out << fixed(100.0 / (100.0 - percentile), 4) << " " << fixed(latency, 2) << "\n";
          }
        }
        out << "EOD\n";
      }
    }
    const json::object* meta = object_at(results_, "meta");
    const std::string subtitle = meta ? text_at(*meta, "date") + ", " + text_at(*meta, "cpu") + ", " +
                                            fixed(number_at(*meta, "cores"), 0) + " cores"
                                      : std::string();
    out << "set multiplot layout 1,3 title 'idemproxy bench: latency by percentile (" << subtitle << ")'\n"
        << "set logscale xy\n"
        << "set xrange [1:*]\n"
        // Tic labels are format strings to gnuplot: a literal percent sign is written %%.
        << "set xtics ('50%%' 2, '90%%' 10, '99%%' 100, '99.9%%' 1000, '99.99%%' 10000, "
           "'99.999%%' 100000, '99.9999%%' 1000000)\n"
        << "set xlabel 'percentile'\nset ylabel 'latency (µs)'\n"
        << "set grid xtics ytics mytics\nset key top left box opaque font ',9'\n";
    block = 0;
    for (const auto& panel : panels) {
      out << "set title '" << panel.title << "'\n";
      if (panel.runs.empty()) {
        out << "set label 1 'no runs' at graph 0.5,0.5 center\nplot [1:10] [1:10] 1/0 notitle\nunset label 1\n";
        continue;
      }
      out << "plot ";
      for (std::size_t i = 0; i < panel.runs.size(); ++i) {
        out << (i ? ", \\\n     " : "") << "$d" << block++ << " using 1:2 with lines lw 2 title '" << panel.runs[i]->scenario
            << "'";
      }
      out << "\n";
    }
    out << "unset multiplot\n";
    return out.str();
  }

 private:
  const Run* find(std::string_view scenario) const {
    for (const auto& run : runs_) {
      if (run.scenario == scenario) return &run;
    }
    return nullptr;
  }
  const Run* find_like(std::string_view kind, const Run& like) const {
    for (const auto& run : runs_) {
      if (run.kind == kind && comparable(run, like)) return &run;
    }
    return nullptr;
  }

  std::string database_and_memory() const {
    std::ostringstream out;
    out << "## Database, Redis and memory\n\n";
    if (const auto* pgbench = object_at(results_, "pgbench")) {
      out << "- pgbench, the proxy's claim + complete statements at " << number_at(*pgbench, "clients")
          << " clients for " << number_at(*pgbench, "duration_s") << " s, prepared (the bound): **"
          << fixed(number_at(*pgbench, "tps"), 0) << " pairs/s**, " << fixed(number_at(*pgbench, "latency_avg_ms") * 1000, 0)
          << " µs average per pair\n";
    }
    if (const auto* extended = object_at(results_, "pgbench_extended")) {
      out << "- the same with unnamed statements (`-M extended`: parsed and planned on every execution): "
          << fixed(number_at(*extended, "tps"), 0) << " pairs/s, " << fixed(number_at(*extended, "latency_avg_ms") * 1000, 0)
          << " µs average per pair\n";
    }
    if (const auto* redis = object_at(results_, "redis_get")) {
      out << "- Redis GET round trip (redis-get: redis-benchmark, 1 client): p50 " << us(number_at(*redis, "p50_us"))
          << " µs, " << fixed(number_at(*redis, "rps"), 0) << " GET/s\n";
    }
    if (const std::string note = redis_replay_note(); !note.empty()) {
      out << "- Redis replay cache during replayredis-c1 (warm-up included): " << note << "\n";
    }
    if (const Run* idle = find("memory-idle")) {
      out << "- idemproxy RSS: " << mib(number_at(*idle->raw, "rss_before_idle_kib")) << " before, "
          << mib(number_at(*idle->raw, "rss_idle_held_kib")) << " with " << number_at(*idle->raw, "idle_established")
          << " idle keep-alive connections" << cache_fill_note() << "\n";
    }
    if (const Run* soak = find("memory-soak")) {
      if (const auto* rss = object_at(*soak->raw, "rss_kib")) {
        out << "- idemproxy RSS over a " << fixed(number_at(*soak->raw, "duration_s"), 0) << " s replay soak ("
            << soak->requests << " replays at " << soak->connections << " connections): "
            << mib(number_at(*rss, "start_kib")) << " at the start, " << mib(number_at(*rss, "end_kib"))
            << " at the end, " << mib(number_at(*rss, "max_kib")) << " peak\n";
      }
    }
    return out.str();
  }

  // "48,210 hits, 0 misses, 1,000 writes, fallbacks 0 timeout / 0 disconnected / 0 error / 0 corrupt",
  // from the Redis proxy's metrics around the replayredis-c1 run; empty when they were not read.
  std::string redis_replay_note() const {
    const auto* redis = object_at(results_, "redis_replay");
    if (redis == nullptr || redis->if_contains("hits") == nullptr) return {};
    std::string note = fixed(number_at(*redis, "hits"), 0) + " Redis hits, " + fixed(number_at(*redis, "misses"), 0) +
                       " misses, " + fixed(number_at(*redis, "writes"), 0) + " writes";
    if (const auto* fallbacks = object_at(*redis, "fallbacks")) {
      note += ", fallbacks to Postgres: " + fixed(number_at(*fallbacks, "timeout"), 0) + " timeout / " +
              fixed(number_at(*fallbacks, "disconnected"), 0) + " disconnected / " + fixed(number_at(*fallbacks, "error"), 0) +
              " error / " + fixed(number_at(*fallbacks, "corrupt"), 0) + " corrupt";
    }
    return note;
  }

  // ", replay cache holding 15.9 of 16.0 MiB", when the proxy's metrics were read.
  std::string cache_fill_note() const {
    const auto* metrics = object_at(results_, "proxy_metrics");
    if (metrics == nullptr) return {};
    const auto* bytes = metrics->if_contains("replay_cache_bytes_before_idle");
    if (bytes == nullptr || bytes->is_null()) return {};
    return ", replay cache holding " + fixed(number(bytes) / 1048576.0, 1) + " of " +
           fixed(number_at(*metrics, "replay_cache_max_bytes") / 1048576.0, 1) + " MiB";
  }

  std::string targets() const {
    std::ostringstream out;
    out << "## Targets (issue 4)\n\n| target | measured | verdict |\n| --- | --- | --- |\n";
    auto verdict = [](bool met, double shortfall_percent) {
      return met ? std::string("met") : "**missed** by " + fixed(shortfall_percent, 0) + "%";
    };
    auto row = [&out](const std::string& target, const std::string& measured, const std::string& result) {
      out << "| " << target << " | " << measured << " | " << result << " |\n";
    };
    auto missing = [&row](const std::string& target, const std::string& why) { row(target, "not measured", why); };

    const Run* nginx1 = find("nginx-c1");
    const Run* nginx64 = find("nginx-c64");
    const Run* direct1 = find("direct-c1");
    const Run* pass1 = find("passthrough-c1");
    const Run* pass64 = find("passthrough-c64");
    const Run* replay1 = find("replay-c1");
    const Run* replay64 = find("replay-c64");
    const Run* redis1 = find("replayredis-c1");
    const Run* first16 = find("first-c16");
    const Run* storm = nullptr;
    for (const auto& run : runs_) {
      if (run.kind == "storm") storm = &run;
    }

    if (pass64 && nginx64) {
      const double r = pass64->throughput / nginx64->throughput;
      row("passthrough, 64 connections: throughput ≥ 1.0× nginx",
          fixed(pass64->throughput, 0) + " vs " + fixed(nginx64->throughput, 0) + " req/s = " + ratio(r),
          verdict(r >= 1.0, (1.0 - r) * 100));
      row("passthrough, 64 connections: p99 ≤ nginx p99", us(pass64->p99) + " vs " + us(nginx64->p99) + " µs",
          verdict(pass64->p99 <= nginx64->p99, (pass64->p99 / nginx64->p99 - 1) * 100));
    } else {
      missing("passthrough, 64 connections vs nginx", "runs absent");
    }
    if (pass1 && nginx1) {
      row("passthrough, 1 connection: p50 ≤ nginx p50", us(pass1->p50) + " vs " + us(nginx1->p50) + " µs",
          verdict(pass1->p50 <= nginx1->p50, (pass1->p50 / nginx1->p50 - 1) * 100));
    } else {
      missing("passthrough, 1 connection: p50 ≤ nginx p50", "runs absent");
    }
    if (replay1 && direct1) {
      const double r = replay1->p50 / direct1->p50;
      row("replay, local-cache hit, 1 connection: p50 ≤ 1.1× direct p50",
          us(replay1->p50) + " vs " + us(direct1->p50) + " µs = " + ratio(r), verdict(r <= 1.1, (r / 1.1 - 1) * 100));
    } else {
      missing("replay, 1 connection: p50 ≤ 1.1× direct p50", "runs absent");
    }
    {
      const auto* redis = object_at(results_, "redis_get");
      const std::string target = "replay, Redis hit, 1 connection: p50 ≤ nginx p50 + one Redis round trip";
      if (redis1 && nginx1 && redis) {
        const double bound = nginx1->p50 + number_at(*redis, "p50_us");
        // The replays must really have been Redis hits for the figure to mean anything.
        const auto* counters = object_at(results_, "redis_replay");
        const double hits = counters ? number_at(*counters, "hits") : -1;
        const std::string served = hits < 0 ? std::string()
                                            : "; " + fixed(hits, 0) + " Redis hits for " + std::to_string(redis1->requests) +
                                                  " measured replays";
        row(target,
            us(redis1->p50) + " vs " + us(nginx1->p50) + " + " + us(number_at(*redis, "p50_us")) + " = " + us(bound) +
                " µs" + served,
            verdict(redis1->p50 <= bound, (redis1->p50 / bound - 1) * 100));
      } else if (nginx1 && redis) {
        missing(target, "bound here: " + us(nginx1->p50 + number_at(*redis, "p50_us")) +
                            " µs; no replayredis-c1 run in this results file");
      } else {
        missing(target, "runs absent");
      }
    }
    if (replay64 && nginx64) {
      const double r = replay64->throughput / nginx64->throughput;
      row("replay, 64 connections: throughput ≥ 1.0× nginx passthrough",
          fixed(replay64->throughput, 0) + " vs " + fixed(nginx64->throughput, 0) + " req/s = " + ratio(r),
          verdict(r >= 1.0, (1.0 - r) * 100));
    } else {
      missing("replay, 64 connections vs nginx", "runs absent");
    }
    if (const auto* pgbench = object_at(results_, "pgbench"); first16 && pgbench && number_at(*pgbench, "tps") > 0) {
      const double r = first16->throughput / number_at(*pgbench, "tps");
      row("first request, 16 connections: throughput ≥ 0.6× pgbench claim+complete at 16 clients",
          fixed(first16->throughput, 0) + " vs " + fixed(number_at(*pgbench, "tps"), 0) + " pairs/s = " + ratio(r),
          verdict(r >= 0.6, (1.0 - r / 0.6) * 100));
    } else {
      missing("first request, 16 connections vs pgbench", "runs absent");
    }
    if (storm) {
      const auto* executions = object_at(*storm->raw, "executions");
      const double rounds = number_at(*storm->raw, "rounds");
      const double delta = executions ? number_at(*executions, "delta") : -1;
      const bool met = storm->errors == 0 && delta == rounds;
      row("storm, " + std::to_string(storm->connections) + " concurrent duplicates: exactly 1 upstream execution, 0 errors",
          fixed(delta, 0) + " executions in " + fixed(rounds, 0) + " round(s), " + std::to_string(storm->errors) + " errors",
          met ? "met" : "**missed**");
    } else {
      missing("storm: exactly 1 upstream execution", "run absent");
    }
    if (const Run* idle = find("memory-idle")) {
      const double held = number_at(*idle->raw, "rss_idle_held_kib");
      row("memory: RSS ≤ 64 MiB with 1,000 idle keep-alive connections (and a full replay cache)",
          mib(held) + " with " + fixed(number_at(*idle->raw, "idle_established"), 0) + " connections" + cache_fill_note(),
          verdict(held > 0 && held <= 64 * 1024, (held / (64 * 1024) - 1) * 100));
    } else {
      missing("memory with idle connections", "run absent");
    }
    if (const Run* soak = find("memory-soak"); soak && object_at(*soak->raw, "rss_kib")) {
      const auto& rss = *object_at(*soak->raw, "rss_kib");
      const double start = number_at(rss, "start_kib");
      const double end = number_at(rss, "end_kib");
      // "Flat": growth within 2 MiB or 5%, whichever is larger (allocator noise, lazily touched pages).
      const double allowed = std::max(2048.0, start * 0.05);
      row("memory: flat over a replay soak", mib(start) + " → " + mib(end) + " (" + fixed((end - start) / 1024, 1) + " MiB)",
          end - start <= allowed ? std::string("met") : "**missed**: grew " + fixed((end - start) / 1024, 1) + " MiB");
    } else {
      missing("memory: flat over a replay soak", "run absent");
    }
    return out.str();
  }

  const json::object& results_;
  std::vector<Run> runs_;
};

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

std::optional<json::value> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  json::value value = json::parse(text.str(), ec);
  if (!in || ec || !value.is_object()) {
    std::cerr << "idem-bench-report: cannot read " << path << (ec ? ": " + ec.message() : std::string()) << "\n";
    return std::nullopt;
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::string results_path, cost_path, markdown_path, gnuplot_path, svg_path = "latency.svg";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view arg = argv[i];
    if (arg == "--results") results_path = argv[i + 1];
    else if (arg == "--cost") cost_path = argv[i + 1];
    else if (arg == "--markdown") markdown_path = argv[i + 1];
    else if (arg == "--gnuplot") gnuplot_path = argv[i + 1];
    else if (arg == "--svg") svg_path = argv[i + 1];
    else {
      std::cerr << "idem-bench-report: unknown option " << arg << "\n";
      return 2;
    }
  }
  if ((results_path.empty() && cost_path.empty()) || (argc - 1) % 2 != 0 || (results_path.empty() && !gnuplot_path.empty())) {
    std::cerr << "usage: idem-bench-report [--results RUN.json] [--cost COST.json] [--markdown OUT.md] "
                 "[--gnuplot OUT.gp] [--svg PATH]\n";
    return 2;
  }
  const std::optional<json::value> results = results_path.empty() ? json::value(json::object()) : read_json(results_path);
  const std::optional<json::value> cost = cost_path.empty() ? json::value(json::object()) : read_json(cost_path);
  if (!results || !cost) return 1;
  const Report report(results->as_object());
  std::string markdown = results_path.empty() ? "# idemproxy bench: latest run\n\n" : report.markdown() + "\n";
  markdown += cost_section(cost->as_object());
  if (!markdown_path.empty() && !write_file(markdown_path, markdown)) {
    std::cerr << "idem-bench-report: cannot write " << markdown_path << "\n";
    return 1;
  }
  if (!gnuplot_path.empty() && !write_file(gnuplot_path, report.gnuplot(svg_path))) {
    std::cerr << "idem-bench-report: cannot write " << gnuplot_path << "\n";
    return 1;
  }
  return 0;
}
