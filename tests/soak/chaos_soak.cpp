// idem-chaos-soak: a bounded chaos run against the real binaries. Client threads issue logical
// requests (one fresh Idempotency-Key each, retried with backoff until a final answer: the
// response, its replay, or 502 outcome-unknown) while a controller kill -9's the proxy at random
// moments and starts it again on the same port and database. The upstream answers after small
// random delays. Afterwards every logical request must have executed upstream at most once, and
// each must either replay its stored response or sit in the recorded unknown state.
//
//   idem-chaos-soak [--duration SECONDS] [--clients N] [--seed S]
//                   [--kill-every-ms MIN:MAX] [--pg-dsn DSN]
//
// The suite runs a short form (ctest: chaos_soak_short, 15 s of chaos). The long form, for a
// release or after touching the claim/lease code:
//   source deploy/local-env.sh && idem_start_postgres /tmp/soak   # or use any test database
//   IDEMPROXY_TEST_PG_DSN="$IDEMPROXY_PG_DSN" build/tests/soak/idem-chaos-soak --duration 60 --clients 8   # ~90 s in all
// Exit status: 0 every invariant held, 1 an invariant broke (listed), 2 the run could not start.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "failure/failure_requests.hpp"
#include "failure/proxy_rig.hpp"
#include "support/proxy_fixture.hpp"

namespace {

using namespace idem::test;
using namespace idem::test::failure;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The timing model's shortest lease with the rig's store timeouts and a 1 s upstream timeout
// (failure/proxy_rig.hpp): 1 s + 4 s.
constexpr milliseconds kLease{5'000};
constexpr milliseconds kAttemptTimeout{5'000};
constexpr milliseconds kFirstBackoff{50};
constexpr milliseconds kMaxBackoff{500};
constexpr int kMaxUpstreamDelayMs = 150;
// After the chaos, a logical request must settle within this (lease lapse + restart slack).
constexpr milliseconds kSettleTime{kLease * 3 + 10s};

struct Options {
  int duration_s = 60;
  int clients = 8;
  std::uint64_t seed = std::random_device{}();
  int kill_min_ms = 300;
  int kill_max_ms = 1500;
  std::string pg_dsn;
};

enum class Final { none, response, unknown };

struct LogicalRequest {
  std::string key;
  Final final = Final::none;
  HttpResponse answer;  // the final answer
  int attempts = 0;
  bool answered_by_replay = false;
};

struct Tally {
  std::mutex mutex;
  std::vector<LogicalRequest> requests;
  std::map<std::string, int> transient_answers;  // retried answers, by kind
};

template <typename Number = int>
std::optional<Number> parse_number(std::string_view text) {
  Number value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    const std::string_view value = has_value ? argv[i + 1] : "";
    if (arg == "--duration" && has_value) {
      const auto seconds = parse_number(value);
      if (!seconds || *seconds < 1 || *seconds > 3600) return std::nullopt;
      options.duration_s = *seconds;
    } else if (arg == "--clients" && has_value) {
      const auto clients = parse_number(value);
      if (!clients || *clients < 1 || *clients > 64) return std::nullopt;
      options.clients = *clients;
    } else if (arg == "--seed" && has_value) {
      const auto seed = parse_number<std::uint64_t>(value);
      if (!seed) return std::nullopt;
      options.seed = *seed;
    } else if (arg == "--kill-every-ms" && has_value) {
      const auto colon = value.find(':');
      const auto low = parse_number(value.substr(0, colon));
      const auto high = colon == std::string_view::npos ? low : parse_number(value.substr(colon + 1));
      if (!low || !high || *low < 50 || *high < *low) return std::nullopt;
      options.kill_min_ms = *low;
      options.kill_max_ms = *high;
    } else if (arg == "--pg-dsn" && has_value) {
      options.pg_dsn = std::string(value);
    } else {
      return std::nullopt;
    }
    ++i;
  }
  return options;
}

std::string answer_kind(const HttpResponse& response) {
  if (!response.ok()) return "no answer (proxy down)";
  const std::string slug = problem_slug(response);
  return std::to_string(response.status) + (slug.empty() ? "" : " " + slug);
}

// One logical request: retried until a final answer or the deadline.
LogicalRequest run_logical_request(std::uint16_t port, std::mt19937_64& random, Clock::time_point give_up_at,
                                   Tally& tally) {
  LogicalRequest request{unique_key("soak"), Final::none, {}, 0, false};
  std::uniform_int_distribution<int> delay(0, kMaxUpstreamDelayMs);
  milliseconds backoff = kFirstBackoff;
  while (Clock::now() < give_up_at) {
    ++request.attempts;
    HttpResponse response = send(port, keyed_post("/lock", request.key).with("X-Test-Delay-Ms", std::to_string(delay(random))),
                                 kAttemptTimeout);
    if (response.ok() && response.status >= 200 && response.status < 300) {
      request.final = Final::response;
      request.answered_by_replay = is_replay(response);
      request.answer = std::move(response);
      return request;
    }
    if (response.ok() && response.status == 502 && problem_slug(response) == "outcome-unknown") {
      request.final = Final::unknown;
      request.answer = std::move(response);
      return request;
    }
    {
      std::lock_guard lock(tally.mutex);
      ++tally.transient_answers[answer_kind(response)];
    }
    std::uniform_int_distribution<long> jitter(backoff.count() / 2, backoff.count());
    std::this_thread::sleep_for(milliseconds(jitter(random)));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  return request;
}

int run(const Options& options) {
  RigOptions rig_options;
  rig_options.variables = {{"UPSTREAM_TIMEOUT", "1s"}, {"LEASE", std::to_string(kLease.count()) + "ms"}, {"POOL_SIZE", "8"}};
  rig_options.pg_dsn = options.pg_dsn;
  ProxyRig rig(rig_options);
  try {
    rig.start();
  } catch (const std::exception& e) {
    std::cerr << "idem-chaos-soak: could not start: " << e.what() << "\n";
    return 2;
  }
  const std::uint16_t port = rig.proxy_port();
  std::cout << "idem-chaos-soak: seed " << options.seed << ", " << options.clients << " clients, "
            << options.duration_s << " s of chaos, kill every " << options.kill_min_ms << ".." << options.kill_max_ms
            << " ms; proxy 127.0.0.1:" << port << std::endl;

  const auto started_at = Clock::now();
  const auto chaos_end = started_at + std::chrono::seconds(options.duration_s);
  const auto give_up_at = chaos_end + kSettleTime;
  std::atomic<bool> chaos_over{false};
  Tally tally;

  std::vector<std::thread> clients;
  for (int c = 0; c < options.clients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937_64 random(options.seed * 1000 + static_cast<std::uint64_t>(c));
      while (!chaos_over.load()) {
        LogicalRequest request = run_logical_request(port, random, give_up_at, tally);
        std::lock_guard lock(tally.mutex);
        tally.requests.push_back(std::move(request));
      }
    });
  }

  int kills = 0;
  std::string controller_error;
  std::mt19937_64 random(options.seed);
  std::uniform_int_distribution<int> pause(options.kill_min_ms, options.kill_max_ms);
  std::uniform_int_distribution<int> down_time(0, 200);
  try {
    while (Clock::now() + milliseconds(options.kill_min_ms) < chaos_end) {
      std::this_thread::sleep_until(std::min(chaos_end, Clock::now() + milliseconds(pause(random))));
      if (Clock::now() >= chaos_end) break;
      rig.kill_proxy();
      ++kills;
      std::this_thread::sleep_for(milliseconds(down_time(random)));
      rig.start_proxy();
    }
  } catch (const std::exception& e) {
    controller_error = e.what();
  }
  chaos_over.store(true);
  for (auto& client : clients) client.join();
  if (!controller_error.empty()) {
    std::cerr << "idem-chaos-soak: the controller failed: " << controller_error << "\n" << rig.diagnostics();
    return 2;
  }

  // Verification, with the proxy left alone.
  std::vector<std::string> violations;
  std::uint64_t executions = 0;
  int duplicates = 0, completed = 0, replayed_first = 0, unknowns = 0, unknown_executed = 0, unknown_lapsed = 0,
      unsettled = 0;
  const auto now_ms = [] {
    return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  for (const LogicalRequest& request : tally.requests) {
    const std::uint64_t count = rig.upstream_count(request.key);
    executions += count;
    if (count > 1) {
      ++duplicates;
      violations.push_back(request.key + ": executed " + std::to_string(count) + " times");
    }
    switch (request.final) {
      case Final::none:
        ++unsettled;
        violations.push_back(request.key + ": no final answer after " + std::to_string(request.attempts) + " attempts");
        break;
      case Final::response: {
        ++completed;
        if (request.answered_by_replay) ++replayed_first;
        const HttpResponse again = send(port, keyed_post("/lock", request.key), kAttemptTimeout);
        if (!is_replay(again) || again.body != request.answer.body) {
          violations.push_back(request.key + ": answered " + std::to_string(request.answer.status) +
                               " but does not replay it now: " + describe(again, 200));
        }
        if (count == 0) violations.push_back(request.key + ": a response, yet the upstream never ran");
        break;
      }
      case Final::unknown: {
        ++unknowns;
        if (count == 1) ++unknown_executed;
        const RecordInspection record = rig.inspect("lock", request.key);
        const bool lapsed = record.state == "in_flight" && record.lease_expires_at_ms <= now_ms();
        if (lapsed) ++unknown_lapsed;
        if (record.state != "unknown" && !lapsed) {
          violations.push_back(request.key + ": answered outcome-unknown but the record says: " + record.output);
        }
        break;
      }
    }
  }

  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - started_at);
  std::cout << "idem-chaos-soak results (" << elapsed.count() / 1000.0 << " s):\n"
            << "  logical requests   " << tally.requests.size() << "\n"
            << "  kills              " << kills << "\n"
            << "  executions         " << executions << "\n"
            << "  completed          " << completed << " (" << replayed_first << " answered by a replay after a kill)\n"
            << "  unknowns           " << unknowns << " (" << unknown_executed << " reached the upstream, "
            << unknowns - unknown_executed << " did not; " << unknowns - unknown_lapsed << " recorded unknown, "
            << unknown_lapsed << " in flight with a lapsed lease)\n"
            << "  unsettled          " << unsettled << "\n"
            << "  duplicates         " << duplicates << "\n"
            << "  retried answers:\n";
  for (const auto& [kind, count] : tally.transient_answers) std::cout << "    " << kind << ": " << count << "\n";

  if (tally.requests.empty()) violations.push_back("no logical request was issued");
  // Every execution the upstream saw belongs to one of the keys above.
  if (const std::uint64_t total = rig.upstream_total(); total != executions) {
    violations.push_back("the upstream ran " + std::to_string(total) + " requests, the keys account for " +
                         std::to_string(executions));
  }
  if (!violations.empty()) {
    std::cout << "INVARIANTS BROKEN (" << violations.size() << "):\n";
    for (std::size_t i = 0; i < violations.size() && i < 50; ++i) std::cout << "  " << violations[i] << "\n";
    std::cout << rig.diagnostics();
    return 1;
  }
  std::cout << "every logical request executed at most once and replays or is a recorded unknown\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = parse_options(argc, argv);
  if (!options) {
    std::cerr << "usage: idem-chaos-soak [--duration SECONDS] [--clients N] [--seed S] [--kill-every-ms MIN:MAX] "
                 "[--pg-dsn DSN]\n";
    return 2;
  }
  try {
    return run(*options);
  } catch (const std::exception& e) {
    std::cerr << "idem-chaos-soak: " << e.what() << "\n";
    return 2;
  }
}
