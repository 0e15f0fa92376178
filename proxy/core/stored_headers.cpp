#include "core/stored_headers.hpp"

#include <algorithm>
#include <array>

#include "core/ascii.hpp"

namespace idem::core {
namespace {

constexpr std::array<std::string_view, 7> kHopByHopFields = {
    "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade"};

// Credentials never belong in a shared store; the rest is recomputed or added on replay.
constexpr std::array<std::string_view, 7> kNeverStoredFields = {
    "Authorization",     "Cookie",         "Proxy-Authorization", "Content-Length", "Idempotency-Transient",
    "Idempotent-Replay", kKeyExpiresHeader};

constexpr std::string_view kFieldSeparator = ": ";
constexpr std::string_view kLineEnd = "\r\n";

bool is_one_of(std::string_view name, const auto& names) {
  return std::any_of(names.begin(), names.end(), [name](std::string_view n) { return ascii::iequals(n, name); });
}

// True when the comma-separated `list` names `name` (Connection: close, X-Foo).
bool list_contains(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    if (ascii::iequals(ascii::trim_ows(list.substr(0, comma)), name)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

bool has_line_break(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

// A field the block layout can hold without ambiguity. HTTP parsers already reject the rest;
// checking here keeps encode/decode an exact round trip whatever the caller passes.
bool is_encodable(std::string_view name, std::string_view value) {
  return !name.empty() && name.find(':') == std::string_view::npos && !has_line_break(name) && !has_line_break(value);
}

}  // namespace

bool is_hop_by_hop(std::string_view name, std::string_view connection_header) {
  return is_one_of(name, kHopByHopFields) || list_contains(connection_header, name);
}

bool keeps_connection_open(unsigned version, std::string_view connection_header) {
  if (list_contains(connection_header, "close")) return false;
  return version >= 11 || list_contains(connection_header, "keep-alive");
}

HeaderList filter_for_storage(const HeaderList& headers, const RoutePolicy& policy) {
  // Connection may come as several field lines; together they form one list.
  std::string connection;
  for (const auto& [name, value] : headers) {
    if (ascii::iequals(name, "Connection")) connection.append(value).append(",");
  }

  HeaderList kept;
  for (const auto& [name, value] : headers) {
    const bool dropped = is_hop_by_hop(name, connection) || is_one_of(name, kNeverStoredFields) ||
                         is_one_of(name, policy.replay_headers) ||
                         (!policy.store_set_cookie && ascii::iequals(name, "Set-Cookie")) || !is_encodable(name, value);
    if (!dropped) kept.emplace_back(name, value);
  }
  return kept;
}

std::string encode_header_block(const HeaderList& headers) {
  std::string block;
  for (const auto& [name, value] : headers) {
    block.append(name).append(kFieldSeparator).append(value).append(kLineEnd);
  }
  return block;
}

std::optional<HeaderList> decode_header_block(std::string_view block) {
  HeaderList headers;
  while (!block.empty()) {
    const std::size_t line_end = block.find(kLineEnd);
    if (line_end == std::string_view::npos) return std::nullopt;
    const std::string_view line = block.substr(0, line_end);
    block.remove_prefix(line_end + kLineEnd.size());

    // The name holds no ':', so the first ": " ends it and the value may contain ": ".
    const std::size_t separator = line.find(kFieldSeparator);
    if (separator == std::string_view::npos) return std::nullopt;
    const std::string_view name = line.substr(0, separator);
    const std::string_view value = line.substr(separator + kFieldSeparator.size());
    if (!is_encodable(name, value)) return std::nullopt;
    headers.emplace_back(name, value);
  }
  return headers;
}

}  // namespace idem::core
