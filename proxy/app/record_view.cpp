#include "app/record_view.hpp"

#include <boost/beast/core/string.hpp>
#include <chrono>
#include <optional>

#include "core/field_values.hpp"
#include "core/request_target.hpp"
#include "fingerprint/fingerprint.hpp"
#include "log/log.hpp"

namespace idem::app {

std::optional<std::string> scope_for(const core::RoutePolicy& policy, const HeaderPairs& headers,
                                     std::optional<std::string_view> host) {
  if (policy.scope_host && !host) return std::nullopt;
  std::vector<std::pair<std::string_view, std::optional<std::string>>> values;
  for (const std::string& name : policy.scope_headers) {
    std::optional<std::string> joined;
    for (const auto& [header, value] : headers) {
      if (!boost::beast::iequals(header, name)) continue;
      core::append_field_line(joined, value);
    }
    values.emplace_back(name, std::move(joined));
  }
  return fingerprint::request_scope(policy, core::scope_host(host.value_or("")), values).scope;
}

std::string record_json(std::string_view route, std::string_view scope, std::string_view key,
                        const store::RecordInfo& info) {
  std::string out = "{\"route\":";
  log::append_json_string(out, route);
  out += ",\"scope\":";
  log::append_json_string(out, scope);
  out += ",\"key\":";
  log::append_json_string(out, key);
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::chrono::milliseconds lease_remaining{info.lease_expires_at_ms - now_ms};
  out +=
      ",\"state\":\"" + std::string(core::record_state_name(core::observed_state(info.state, lease_remaining))) + "\"";
  out += std::string(",\"lease_lapsed\":") + (core::lease_lapsed(info.state, lease_remaining) ? "true" : "false");
  out += ",\"fingerprint\":\"" + info.fingerprint + "\"";
  out += ",\"created_at_ms\":" + std::to_string(info.created_at_ms);
  out += ",\"lease_expires_at_ms\":" + std::to_string(info.lease_expires_at_ms);
  out += ",\"completed_at_ms\":" + std::to_string(info.completed_at_ms);
  out += ",\"expires_at_ms\":" + std::to_string(info.expires_at_ms);
  out += ",\"response_status\":" + std::to_string(info.response_status);
  out += ",\"body_bytes\":" + std::to_string(info.body_bytes) + "}";
  return out;
}

}  // namespace idem::app
