#include "app/record_commands.hpp"

#include "app/record_view.hpp"

#include <algorithm>
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

// The record's scope; nullopt (and said why on stderr) when the command cannot name it.
std::optional<std::string> scope_of(const config::Config& config, const RecordCommand& command) {
  for (const core::Route& route : config.routes) {
    if (route.policy.name != command.route) continue;
    std::optional<std::string_view> host;  // the Host the original request carried
    for (const auto& [name, value] : command.headers) {
      if (boost::beast::iequals(name, "Host")) host = value;
    }
    std::optional<std::string> scope = scope_for(route.policy, command.headers, host);
    if (!scope) {
      std::cerr << "idemproxy: route '" << command.route
                << "' scopes keys by host: name the original request's host with --header 'Host: <host>'\n";
    }
    return scope;
  }
  std::cerr << "idemproxy: no route named '" << command.route << "' in the configuration\n";
  return std::nullopt;
}

}  // namespace

int run_record_command(const config::Config& config, const RecordCommand& command) {
  const std::optional<std::string> scope = scope_of(config, command);
  if (!scope) return 1;
  boost::asio::io_context io;
  pg::PoolOptions pool;
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
    store.inspect(key, [&](store::StoreError error, const store::RecordInfo& info) {
      if (error == store::StoreError::ok) {
        std::cout << record_json(command.route, *scope, command.key, info) << "\n";
        exit_code = 0;
      } else {
        report_error(error);
      }
      store.stop();
    });
  } else {
    store.force_release(key, [&](store::StoreError error, std::chrono::milliseconds lease_left) {
      if (error == store::StoreError::ok) {
        log::info("admin_release", {{"route", command.route}, {"scope", *scope}, {"source", "cli"}});
        std::cout << "released: the next request with this key executes\n";
        exit_code = 0;
      } else if (error == store::StoreError::lease_running) {
        const auto left = std::max(std::chrono::ceil<std::chrono::seconds>(lease_left), std::chrono::seconds(1));
        std::cerr << "idemproxy: not released: the record is in flight and its lease runs for " << left.count()
                  << " s more; its request may be executing, and a release would let a retry run it twice. "
                     "Try again once the lease has lapsed.\n";
        exit_code = 4;
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
