#include "app/record_commands.hpp"

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <iostream>
#include <optional>

#include <boost/beast/core/string.hpp>
#include "fingerprint/fingerprint.hpp"
#include "log/log.hpp"
#include "store/pg/pg_store.hpp"

namespace idem::app {
namespace {

std::optional<std::string> scope_for(const config::Config& config, const RecordCommand& command) {
  for (const core::Route& route : config.routes) {
    if (route.policy.name != command.route) continue;
    std::vector<std::pair<std::string_view, std::optional<std::string>>> values;
    for (const std::string& name : route.policy.scope_headers) {
      std::optional<std::string> value;
      for (const auto& [header, given] : command.headers) {
        if (!boost::beast::iequals(header, name)) continue;
        if (value) *value += ", "; else value.emplace();
        *value += given;
      }
      values.emplace_back(name, std::move(value));
    }
    return fingerprint::record_scope(route.policy.name, values);
  }
  return std::nullopt;
}

std::string record_json(const store::RecordInfo& info, const std::string& scope, const std::string& key) {
  std::string out = "{\"scope\":";
  log::append_json_string(out, scope);
  out += ",\"key\":";
  log::append_json_string(out, key);
  out += ",\"state\":\"";
  out += core::record_state_name(info.state);
  out += "\",\"fingerprint\":\"" + info.fingerprint + "\"";
  out += ",\"created_at_ms\":" + std::to_string(info.created_at_ms);
  out += ",\"lease_expires_at_ms\":" + std::to_string(info.lease_expires_at_ms);
  out += ",\"completed_at_ms\":" + std::to_string(info.completed_at_ms);
  out += ",\"expires_at_ms\":" + std::to_string(info.expires_at_ms);
  out += ",\"response_status\":" + std::to_string(info.response_status);
  out += ",\"body_bytes\":" + std::to_string(info.body_bytes) + "}";
  return out;
}

}  // namespace

int run_record_command(const config::Config& config, const RecordCommand& command) {
  const std::optional<std::string> scope = scope_for(config, command);
  if (!scope) {
    std::cerr << "idemproxy: no route named '" << command.route << "' in the configuration\n";
    return 1;
  }
  boost::asio::io_context io;
  store::pg::PoolOptions pool;
  pool.dsn = config.store.postgres.dsn;
  pool.size = 1;
  pool.connect_timeout = config.store.postgres.connect_timeout;
  pool.query_timeout = config.store.postgres.query_timeout;
  pool.acquire_timeout = config.store.postgres.connect_timeout + config.store.postgres.acquire_timeout;
  store::pg::PgStore store(io, pool);
  store.start();

  int exit_code = 1;
  const store::RecordKey key{*scope, command.key};
  auto report_error = [&](store::StoreError error) {
    if (error == store::StoreError::not_found) {
      std::cerr << "idemproxy: no " << (command.kind == RecordCommand::Kind::release ? "releasable " : "")
                << "record for route '" << command.route << "' and this key (scope " << *scope << ")\n";
      exit_code = 3;
    } else {
      std::cerr << "idemproxy: store error: " << store::store_error_name(error) << "\n";
    }
  };
  if (command.kind == RecordCommand::Kind::inspect) {
    store.inspect(key, [&](store::StoreError error, store::RecordInfo info) {
      if (error == store::StoreError::ok) {
        std::cout << record_json(info, *scope, command.key) << "\n";
        exit_code = 0;
      } else {
        report_error(error);
      }
      store.stop();
    });
  } else {
    store.force_release(key, [&](store::StoreError error) {
      if (error == store::StoreError::ok) {
        log::info("admin_release", {{"route", command.route}, {"scope", *scope}, {"source", "cli"}});
        std::cout << "released: the next request with this key executes\n";
        exit_code = 0;
      } else {
        report_error(error);
      }
      store.stop();
    });
  }
  io.run();
  return exit_code;
}

}  // namespace idem::app
