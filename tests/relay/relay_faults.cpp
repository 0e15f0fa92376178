#include "relay/relay_faults.hpp"

#include <csignal>
#include <regex>
#include <stdexcept>

#include "relay/relay_env.hpp"
#include "support/env.hpp"
#include "support/eventually.hpp"

namespace idem::test::relay {

FaultProxy::Matcher claim_statement() { return contains_all({"WITH lanes AS MATERIALIZED"}); }
FaultProxy::Matcher settle_statement() { return contains_all({"parked_at     = CASE WHEN o.id = ANY($5::int8[])"}); }
FaultProxy::Matcher publish_script() { return contains_all({"EVALSHA"}); }

std::uint16_t suite_postgres_port() {
  std::smatch match;
  const std::string dsn = pg_dsn();
  if (!std::regex_search(dsn, match, std::regex(R"(port=(\d+))"))) throw std::runtime_error("no port in " + dsn);
  return static_cast<std::uint16_t>(std::stoi(match[1]));
}

std::string dsn_through(const std::string& schema_dsn, const FaultProxy& proxy) {
  return std::regex_replace(schema_dsn, std::regex(R"(port=\d+)"), "port=" + std::to_string(proxy.port())) +
         " sslmode=disable";
}

void hold_next_reply(FaultProxy& proxy, FaultProxy::Matcher matches) {
  proxy.delay_next_reply(std::move(matches), std::chrono::milliseconds(300));
}

bool stop_while_reply_held(const FaultProxy& proxy, Process& relay, std::chrono::milliseconds timeout) {
  if (!proxy.wait_fired(1, timeout) || !relay.signal(SIGSTOP)) return false;
  return eventually([&] { return is_stopped(relay.pid()); }, timeout);
}

}  // namespace idem::test::relay
