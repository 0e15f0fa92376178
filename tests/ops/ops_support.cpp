#include "ops/ops_support.hpp"

#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "support/blocking_pg.hpp"
#include "support/env.hpp"
#include "support/eventually.hpp"
#include "support/random_hex.hpp"

namespace idem::test::ops {

namespace {

constexpr std::string_view kFixtureAdminLine = R"(admin: { listen: "127.0.0.1:0" })";
constexpr std::string_view kAdminListeningEvent = R"("event":"admin_listening")";

HttpResponse admin_request(std::uint16_t port, HttpRequest request, const std::optional<std::string>& token,
                           std::vector<std::pair<std::string, std::string>> headers) {
  if (token) request.with("Authorization", "Bearer " + *token);
  for (auto& [name, value] : headers) request.with(std::move(name), std::move(value));
  return send(port, request, std::chrono::seconds(10));
}

std::string replace_once(std::string_view text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  if (at == std::string_view::npos) throw std::runtime_error("config template has no \"" + std::string(from) + "\"");
  std::string out(text.substr(0, at));
  out += to;
  out += text.substr(at + from.size());
  return out;
}

}  // namespace

std::string config_with_admin(std::string_view admin_line) {
  return replace_once(default_config_template(), kFixtureAdminLine, admin_line);
}

std::string with_extra_route(std::string_view text, std::string_view route_yaml) {
  return replace_once(text, "\nlimits:", "\n" + std::string(route_yaml) + "limits:");
}

std::uint16_t admin_port_of(Process& proxy, std::chrono::milliseconds timeout) {
  std::optional<std::uint16_t> port;
  eventually(
      [&] {
        for (const auto& line : events(proxy.stderr_text(), "admin_listening")) {
          const auto address = string_field(line, "address").value_or("");
          const auto colon = address.rfind(':');
          if (colon == std::string::npos) continue;
          const int value = std::atoi(address.c_str() + colon + 1);
          if (value > 0 && value < 65536) port = static_cast<std::uint16_t>(value);
        }
        return port.has_value() || !proxy.running();
      },
      timeout);
  if (!port) {
    throw std::runtime_error("no " + std::string(kAdminListeningEvent) + " line from the proxy:\n" + proxy.describe());
  }
  return *port;
}

HttpResponse admin_get(std::uint16_t port, std::string target, std::optional<std::string> token,
                       std::vector<std::pair<std::string, std::string>> headers) {
  return admin_request(port, HttpRequest::get(std::move(target)), token, std::move(headers));
}

HttpResponse admin_post(std::uint16_t port, std::string target, std::optional<std::string> token,
                        std::vector<std::pair<std::string, std::string>> headers) {
  return admin_request(port, HttpRequest::post(std::move(target), "", ""), token, std::move(headers));
}

std::optional<double> metric_value(std::string_view exposition, std::string_view series) {
  std::size_t position = 0;
  while (position < exposition.size()) {
    auto end = exposition.find('\n', position);
    if (end == std::string_view::npos) end = exposition.size();
    const std::string_view line = exposition.substr(position, end - position);
    position = end + 1;
    if (line.size() > series.size() && line.starts_with(series) && line[series.size()] == ' ') {
      const std::string number(line.substr(series.size() + 1));
      char* parsed_end = nullptr;
      const double value = std::strtod(number.c_str(), &parsed_end);
      if (parsed_end == number.c_str()) return std::nullopt;
      return value;
    }
  }
  return std::nullopt;
}

std::optional<std::string> metric_type(std::string_view exposition, std::string_view family) {
  const std::string prefix = "# TYPE " + std::string(family) + " ";
  const auto at = exposition.find(prefix);
  if (at == std::string_view::npos || (at != 0 && exposition[at - 1] != '\n')) return std::nullopt;
  const auto start = at + prefix.size();
  const auto end = exposition.find('\n', start);
  return std::string(exposition.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
}

std::string promtool_binary() {
  if (const auto configured = env_var("IDEMPROXY_PROMTOOL")) return *configured;
  std::stringstream path(env_var("PATH").value_or("/usr/local/bin:/usr/bin:/bin"));
  std::string directory;
  while (std::getline(path, directory, ':')) {
    if (directory.empty()) continue;
    const auto candidate = std::filesystem::path(directory) / "promtool";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error("promtool not found in $PATH (Debian package `prometheus`; tests/run.sh installs it)");
}

std::vector<boost::json::object> json_lines(std::string_view text) {
  std::vector<boost::json::object> out;
  std::size_t position = 0;
  while (position < text.size()) {
    auto end = text.find('\n', position);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(position, end - position);
    position = end + 1;
    if (!line.starts_with('{')) continue;
    boost::system::error_code ec;
    auto value = boost::json::parse(line, ec);
    if (!ec && value.is_object()) out.push_back(std::move(value.as_object()));
  }
  return out;
}

std::vector<boost::json::object> events(std::string_view text, std::string_view event) {
  std::vector<boost::json::object> out;
  for (auto& line : json_lines(text)) {
    if (string_field(line, "event") == std::optional<std::string>(event)) out.push_back(std::move(line));
  }
  return out;
}

std::optional<std::string> string_field(const boost::json::object& object, std::string_view name) {
  const auto* value = object.if_contains(name);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return std::string(value->as_string());
}

std::optional<std::int64_t> int_field(const boost::json::object& object, std::string_view name) {
  const auto* value = object.if_contains(name);
  if (value == nullptr) return std::nullopt;
  if (value->is_int64()) return value->as_int64();
  if (value->is_uint64()) return static_cast<std::int64_t>(value->as_uint64());
  return std::nullopt;
}

std::string key_sha256_prefix(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("EVP_Digest(sha256) failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex.substr(0, 16);
}

void replace_keeping_mtime(const std::filesystem::path& path, const std::string& text) {
  const auto staged = std::filesystem::path(path.string() + ".staged");
  write_file(staged, text);
  std::filesystem::last_write_time(staged, std::filesystem::last_write_time(path));
  std::filesystem::rename(staged, path);
}

ScratchDatabase::ScratchDatabase() {
  name_ = "idem_ops_" + random_hex(12);  // [a-z_0-9]: safe unquoted
  // CREATE/DROP DATABASE take no parameters.
  BlockingPg(pg_dsn()).execute("CREATE DATABASE " + name_);
  dsn_ = dsn_with(pg_dsn(), "dbname", name_);
}

ScratchDatabase::~ScratchDatabase() {
  try {
    BlockingPg(pg_dsn()).execute("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
}

StandaloneProxy::StandaloneProxy(const std::string& config_text, std::string_view name)
    : dir_("idem-ops"), launcher_(dir_.path()) {
  launcher_.write_config_text(config_text);
  admin_port_ = admin_port_of(launcher_.start(name));
}

StandaloneProxy::~StandaloneProxy() { launcher_.stop(std::chrono::seconds(5)); }

std::string StandaloneProxy::diagnostics() {
  return launcher_.started() > 0 ? launcher_.last().describe() : std::string("not started");
}

}  // namespace idem::test::ops
