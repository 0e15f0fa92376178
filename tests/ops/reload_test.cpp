// Hot reload: SIGHUP, or a new modification time of the config file (also through a swapped
// symlink, as Kubernetes updates a ConfigMap volume), applies new routes to requests that start
// afterwards without dropping connections; an invalid file is rejected, its problems logged as
// file:line:col, and the running configuration kept.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "ops/ops_support.hpp"
#include "support/eventually.hpp"

namespace idem::test::ops {
namespace {

namespace fs = std::filesystem;

// Turns POST /new-path (proxied plainly by the fixture's config) into a keyed route.
constexpr std::string_view kNewRoute =
    "  - name: new-path\n"
    "    match: { method: POST, path: /new-path }\n";
constexpr std::chrono::seconds kReloadWithin{1};

HttpRequest new_path_without_key() { return HttpRequest::post("/new-path", R"({"a":1})"); }

std::size_t reload_count(Process& proxy, std::string_view event, std::string_view trigger) {
  std::size_t count = 0;
  for (const auto& line : events(proxy.stderr_text(), event)) count += string_field(line, "trigger") == trigger;
  return count;
}

// True once a fresh connection's POST /new-path without a key gets the keyed route's 400.
bool new_route_active(std::uint16_t port) {
  const HttpResponse response = send(port, new_path_without_key());
  return response.status == 400;
}

class OpsReload : public ProxyTest {};

TEST_F(OpsReload, SighupAppliesNewRoutesAndKeepsOpenConnections) {
  Process& process = *proxy().proxy_process();
  HttpConnection connection(proxy().proxy_port());
  const HttpResponse before = connection.send(new_path_without_key());
  ASSERT_EQ(before.status, 200) << describe(before);  // no route yet: plain proxying
  ASSERT_TRUE(connection.is_open());

  // Same mtime (the watcher may still see the new size or inode; the signal must reload regardless).
  replace_keeping_mtime(proxy().config_path(), with_extra_route(proxy().config_text(), kNewRoute));
  ASSERT_TRUE(process.signal(SIGHUP));
  ASSERT_TRUE(eventually([&] { return reload_count(process, "reloaded", "signal") == 1; }, std::chrono::seconds(5)))
      << process.stderr_text();

  // The connection opened before the reload carries on, with the new routes.
  const HttpResponse after = connection.send(new_path_without_key());
  e2e::expect_problem(after, 400, "key-missing");
  EXPECT_TRUE(connection.is_open());
  EXPECT_EQ(connection.requests_sent(), 2u);
  const std::string key = unique_key("reloaded-route");
  const HttpResponse keyed = connection.send(new_path_without_key().with("Idempotency-Key", key));
  EXPECT_EQ(keyed.status, 200) << describe(keyed);
  const HttpResponse replay = connection.send(new_path_without_key().with("Idempotency-Key", key));
  EXPECT_TRUE(e2e::is_replay(replay)) << describe(replay);
  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_EQ(connection.requests_sent(), 4u);
  EXPECT_TRUE(connection.is_open());
  EXPECT_EQ(reload_count(process, "reloaded", "file_changed"), 0u);
}

TEST_F(OpsReload, ChangedFileIsPickedUpWithoutASignal) {
  Process& process = *proxy().proxy_process();
  ASSERT_EQ(send(new_path_without_key()).status, 200);
  const auto written = std::chrono::steady_clock::now();
  write_file(proxy().config_path(), with_extra_route(proxy().config_text(), kNewRoute));
  ASSERT_TRUE(eventually([&] { return new_route_active(proxy().proxy_port()); }, std::chrono::seconds(5)))
      << process.stderr_text();
  EXPECT_LE(std::chrono::steady_clock::now() - written, kReloadWithin + std::chrono::milliseconds(500));
  // The new routes serve before the reload's log line is written (the swap comes first).
  EXPECT_TRUE(
      eventually([&] { return reload_count(process, "reloaded", "file_changed") >= 1; }, std::chrono::seconds(2)))
      << process.stderr_text();
  EXPECT_EQ(reload_count(process, "reloaded", "file_changed"), 1u) << process.stderr_text();
}

// A ConfigMap volume: the config path is a symlink into ..data, itself a symlink to a timestamped
// directory; an update writes a new directory and swaps ..data atomically.
TEST_F(OpsReload, ConfigMapStyleSymlinkSwapIsPickedUp) {
  Process& process = *proxy().proxy_process();
  const fs::path volume = proxy().work_dir() / "configmap";
  fs::create_directories(volume / "..v1");
  write_file(volume / "..v1" / "idemproxy.yaml", proxy().config_text());
  fs::create_directory_symlink("..v1", volume / "..data");
  const fs::path staged_link = proxy().config_path().string() + ".link";
  fs::create_symlink(volume / "..data" / "idemproxy.yaml", staged_link);
  fs::rename(staged_link, proxy().config_path());
  // The path now resolves to another file (another mtime): one reload, same routes.
  ASSERT_TRUE(
      eventually([&] { return reload_count(process, "reloaded", "file_changed") == 1; }, std::chrono::seconds(5)))
      << process.stderr_text();
  ASSERT_EQ(send(new_path_without_key()).status, 200);

  fs::create_directories(volume / "..v2");
  write_file(volume / "..v2" / "idemproxy.yaml", with_extra_route(proxy().config_text(), kNewRoute));
  fs::create_directory_symlink("..v2", volume / "..data_tmp");
  fs::rename(volume / "..data_tmp", volume / "..data");
  const auto swapped = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return new_route_active(proxy().proxy_port()); }, std::chrono::seconds(5)))
      << process.stderr_text();
  EXPECT_LE(std::chrono::steady_clock::now() - swapped, kReloadWithin + std::chrono::milliseconds(500));
}

TEST_F(OpsReload, InvalidFileIsRejectedWithFileLineColumnAndTheOldRoutesKeepWorking) {
  Process& process = *proxy().proxy_process();
  const std::string key = unique_key("before-bad-reload");
  ASSERT_EQ(send(e2e::order(key)).status, 200);

  const std::string broken_route =
      "  - name: new-path\n"
      "    match: { method: POST, path: /new-path }\n"
      "    lease: 5x\n";
  const std::string text = with_extra_route(proxy().config_text(), broken_route);
  // Where the bad value is, 1-based, as an editor shows it.
  const auto value_at = text.find("lease: 5x") + std::string_view("lease: ").size();
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(value_at), '\n');
  const auto column = value_at - text.rfind('\n', value_at);
  write_file(proxy().config_path(), text);

  ASSERT_TRUE(eventually([&] { return reload_count(process, "reload_rejected", "file_changed") == 1; },
                         std::chrono::seconds(5)))
      << process.stderr_text();
  const std::string where =
      proxy().config_path().string() + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  bool located = false;
  for (const auto& issue : events(process.stderr_text(), "config_issue")) {
    const std::string message = string_field(issue, "issue").value_or("");
    located |= message.rfind(where, 0) == 0 && message.find("5x") != std::string::npos;
  }
  EXPECT_TRUE(located) << "no config_issue starting with " << where << "\n" << process.stderr_text();

  // A signal on the same bad file is rejected too; nothing was ever applied.
  ASSERT_TRUE(process.signal(SIGHUP));
  ASSERT_TRUE(
      eventually([&] { return reload_count(process, "reload_rejected", "signal") == 1; }, std::chrono::seconds(5)))
      << process.stderr_text();
  EXPECT_TRUE(events(process.stderr_text(), "reloaded").empty()) << process.stderr_text();

  // The running configuration is the old one: /new-path is still plain, /orders still keyed.
  EXPECT_EQ(send(new_path_without_key()).status, 200);
  e2e::expect_problem(send(HttpRequest::post("/orders", std::string(e2e::kOrderBody))), 400, "key-missing");
  const HttpResponse replay = send(e2e::order(key));
  EXPECT_TRUE(e2e::is_replay(replay)) << describe(replay);
  EXPECT_EQ(upstream_count(key), 1u);
  EXPECT_TRUE(process.running());
}

// upstream is restart-only, so a reload's routes are checked against the running upstream, not
// against the file's. Running with timeout 5s, a file that says timeout 1s and gives a route a
// 6s lease is refused: the file's own timeouts would allow it (2 × query 1s + acquire 500ms +
// connect 1s + upstream 1s + margin 1s = 5.5s), the running ones need 9.5s (that lease would lapse
// while the running upstream may still be working on the request, and a retry could run it
// again); the old routes stay; the refusal is counted.
TEST_F(OpsReload, RoutesAreCheckedAgainstTheRunningUpstreamNotTheFiles) {
  Process& process = *proxy().proxy_process();
  std::string text = with_extra_route(proxy().config_text(), std::string(kNewRoute) + "    lease: 6s\n");
  const std::string running_timeout = "timeout: 5s }";
  ASSERT_NE(text.find(running_timeout), std::string::npos) << text;
  text.replace(text.find(running_timeout), running_timeout.size(), "timeout: 1s }");
  write_file(proxy().config_path(), text);

  ASSERT_TRUE(eventually([&] { return reload_count(process, "reload_rejected", "file_changed") == 1; },
                         std::chrono::seconds(5)))
      << process.stderr_text();
  bool named = false;
  for (const auto& issue : events(process.stderr_text(), "config_issue")) {
    const std::string message = string_field(issue, "issue").value_or("");
    named |= message.find(
                 "route \"new-path\": lease (6s) must be at least the longest exchange of the running upstream "
                 "and store plus a 1s margin (9500ms = 2 × store.postgres.query_timeout 1s + "
                 "store.postgres.acquire_timeout 500ms + upstream.connect_timeout 1s + upstream.timeout 5s + "
                 "margin 1s)") != std::string::npos;
  }
  EXPECT_TRUE(named) << process.stderr_text();
  EXPECT_EQ(send(new_path_without_key()).status, 200) << "the refused route is in force";
  const std::string metrics = admin_get(admin_port_of(process), "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "idemproxy_config_reloads_rejected_total"), 1.0) << metrics;
  EXPECT_EQ(metric_value(metrics, "idemproxy_config_reloads_applied_total"), 0.0) << metrics;
}

// A reload that changes a route's scope headers forgets the keys stored under the old scope: it is
// applied, the route is named (a config_issue warning at file:line:col and a key_space_changed
// event), and, as the README warns, a retry that straddles it executes again.
TEST_F(OpsReload, AReloadThatChangesAScopeNamesTheRouteAndItsRetryExecutesAgain) {
  Process& process = *proxy().proxy_process();
  const std::string key = unique_key("straddles-reload");
  const HttpResponse first = send(e2e::order(key));
  ASSERT_EQ(first.status, 200) << describe(first);

  std::string text = proxy().config_text();
  const std::string orders_scope = "path: /orders }\n    scope: { headers: [X-Tenant-Id] }";
  ASSERT_NE(text.find(orders_scope), std::string::npos) << text;
  text.replace(text.find(orders_scope), orders_scope.size(),
               "path: /orders }\n    scope: { headers: [X-Tenant-Id, X-Region] }");
  write_file(proxy().config_path(), text);
  ASSERT_TRUE(
      eventually([&] { return reload_count(process, "reloaded", "file_changed") == 1; }, std::chrono::seconds(5)))
      << process.stderr_text();

  const auto changes = events(process.stderr_text(), "key_space_changed");
  ASSERT_EQ(changes.size(), 1u) << process.stderr_text();
  EXPECT_EQ(string_field(changes[0], "route"), "orders");
  EXPECT_EQ(string_field(changes[0], "change"), "scope.headers changed from [X-Tenant-Id] to [X-Tenant-Id, X-Region]");
  bool located = false;
  for (const auto& issue : events(process.stderr_text(), "config_issue")) {
    const std::string message = string_field(issue, "issue").value_or("");
    located |= message.find(proxy().config_path().string() +
                            ":11:5: warning: route \"orders\" scope.headers changed") != std::string::npos;
  }
  EXPECT_TRUE(located) << process.stderr_text();

  const HttpResponse retry = send(e2e::order(key));
  EXPECT_EQ(retry.status, 200) << describe(retry);
  EXPECT_FALSE(e2e::is_replay(retry)) << "the old scope's record is not found";
  EXPECT_EQ(upstream_count(key), 2u);
}

}  // namespace
}  // namespace idem::test::ops
