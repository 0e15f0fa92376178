#pragma once
// What the operations tests share: finding and calling a proxy's admin listener, reading
// Prometheus text and the proxy's JSON log lines, editing a running proxy's config file, and
// running a proxy without the fixture (for configurations --migrate cannot start from).
#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/http_client.hpp"
#include "support/process.hpp"
#include "support/proxy_fixture.hpp"
#include "support/proxy_launcher.hpp"
#include "support/temp_dir.hpp"

namespace idem::test::ops {

// The default e2e config with its admin line replaced (the fixture listens on 127.0.0.1:0).
std::string config_with_admin(std::string_view admin_line);
// text with route_yaml (a complete "  - name: ..." list item, newline-terminated) appended to the
// routes list, which in the fixture's config is followed by the "limits:" line.
std::string with_extra_route(std::string_view text, std::string_view route_yaml);

// The admin port the proxy announced in its "admin_listening" log line (waits up to timeout).
// Throws std::runtime_error (with the process's logs) when it never appears.
std::uint16_t admin_port_of(Process& proxy, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// GET or POST on the admin listener, with "Authorization: Bearer <token>" when token is set.
HttpResponse admin_get(std::uint16_t port, std::string target, std::optional<std::string> token = std::nullopt,
                       std::vector<std::pair<std::string, std::string>> headers = {});
HttpResponse admin_post(std::uint16_t port, std::string target, std::optional<std::string> token = std::nullopt,
                        std::vector<std::pair<std::string, std::string>> headers = {});

// The value of one series in Prometheus text, series written exactly as exposed, e.g.
// `idemproxy_requests_total{route="orders",decision="new"}`. nullopt when absent.
std::optional<double> metric_value(std::string_view exposition, std::string_view series);
// The TYPE a family is declared with ("counter", "gauge", "histogram"), nullopt when undeclared.
std::optional<std::string> metric_type(std::string_view exposition, std::string_view family);

// promtool from $IDEMPROXY_PROMTOOL or $PATH. Throws std::runtime_error when there is none: the
// metrics test fails (never skips) without it; tests/run.sh installs it (Debian `prometheus`).
std::string promtool_binary();

// The JSON objects among text's lines (non-JSON lines skipped).
std::vector<boost::json::object> json_lines(std::string_view text);
// Those of one event ("event" member).
std::vector<boost::json::object> events(std::string_view text, std::string_view event);
std::optional<std::string> string_field(const boost::json::object& object, std::string_view name);
std::optional<std::int64_t> int_field(const boost::json::object& object, std::string_view name);

// The first 16 hex digits of SHA-256(text): the key hash the proxy logs.
std::string key_sha256_prefix(std::string_view text);

// Replaces path's content without changing its modification time (write a sibling file, give it
// the old mtime, rename it over): a change only SIGHUP can reveal to the file watcher.
// (write_file, which gives a new mtime, is support/config_text's.)
void replace_keeping_mtime(const std::filesystem::path& path, const std::string& text);

// A database of its own for one test (CREATE DATABASE on the test server), dropped at the end
// (WITH (FORCE): a leftover session cannot keep it). For counts no other test may disturb.
class ScratchDatabase {
 public:
  ScratchDatabase();  // throws std::runtime_error when the test server refuses
  ~ScratchDatabase();
  ScratchDatabase(const ScratchDatabase&) = delete;
  ScratchDatabase& operator=(const ScratchDatabase&) = delete;

  const std::string& dsn() const { return dsn_; }

 private:
  std::string name_;
  std::string dsn_;
};

// An idemproxy started from a config text as it is (no --migrate, no upstream; through
// support/proxy_launcher): for databases the fixture could not migrate, e.g. one that is unreachable.
class StandaloneProxy {
 public:
  explicit StandaloneProxy(const std::string& config_text, std::string_view name = "proxy");
  ~StandaloneProxy();
  StandaloneProxy(const StandaloneProxy&) = delete;
  StandaloneProxy& operator=(const StandaloneProxy&) = delete;

  Process& process() { return launcher_.last(); }
  std::uint16_t admin_port() const { return admin_port_; }
  std::string diagnostics();

 private:
  TempDir dir_;
  ProxyLauncher launcher_;  // declared after dir_: its process goes first
  std::uint16_t admin_port_ = 0;
};

}  // namespace idem::test::ops
