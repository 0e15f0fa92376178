#include "relay/parked_rows.hpp"

#include <charconv>

#include "core/percent_decoding.hpp"
#include "log/log.hpp"
#include "pg/binary_row.hpp"
#include "relay/sql.hpp"

namespace idem::relay {

std::optional<AggregateRef> parse_aggregate(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size()) return std::nullopt;
  return AggregateRef{.type = std::string(text.substr(0, slash)), .id = std::string(text.substr(slash + 1))};
}

std::optional<std::size_t> parse_parked_limit(std::string_view text) {
  std::size_t limit = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
  if (ec != std::errc{} || end != text.data() + text.size() || limit == 0 || limit > kMaxParkedLimit) {
    return std::nullopt;
  }
  return limit;
}

ParkedTarget parse_parked_query_string(std::string_view query_string) {
  ParkedQuery query;
  while (!query_string.empty()) {
    const std::size_t amp = query_string.find('&');
    const std::string_view pair = query_string.substr(0, amp);
    query_string = amp == std::string_view::npos ? std::string_view() : query_string.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    const auto value = core::percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!value) return {.query = std::nullopt, .error = "bad percent-encoding in " + std::string(name)};
    if (name == "aggregate") {
      query.aggregate = parse_aggregate(*value);
      if (!query.aggregate) return {.query = std::nullopt, .error = "aggregate takes TYPE/ID (e.g. order%2F42)"};
    } else if (name == "limit") {
      const auto limit = parse_parked_limit(*value);
      if (!limit) {
        return {.query = std::nullopt, .error = "limit takes a number from 1 to " + std::to_string(kMaxParkedLimit)};
      }
      query.limit = *limit;
    } else if (!name.empty()) {
      return {.query = std::nullopt, .error = "unknown parameter " + std::string(name) + " (aggregate, limit)"};
    }
  }
  return {.query = query, .error = {}};
}

pg::Statement parked_statement(const ParkedQuery& query) {
  const auto limit = pg::Param::int8(static_cast<std::int64_t>(query.limit));
  if (query.aggregate) {
    return pg::Statement{"list_parked_of_aggregate",
                         sql::kListParkedOfAggregate,
                         {limit, pg::Param::text(query.aggregate->type), pg::Param::text(query.aggregate->id)}};
  }
  return pg::Statement{"list_parked", sql::kListParked, {limit}};
}

std::optional<ParkedList> decode_parked(const PGresult* result, std::size_t limit) {
  ParkedList list;
  list.limit = limit;
  const int count = PQntuples(result);
  for (int index = 0; index < count; ++index) {
    const pg::BinaryRow row(result, index);
    const auto id = row.int8(0);
    const auto aggregate_type = row.text(1);
    const auto aggregate_id = row.text(2);
    const auto event_type = row.text(3);
    const auto attempts = row.int4(4);
    const auto last_error = row.text(5);
    const auto parked_at = row.text(6);
    const auto held_behind = row.int8(7);
    const auto total = row.int8(8);
    if (!id || !aggregate_type || !aggregate_id || !event_type || !attempts || !last_error || !parked_at ||
        !held_behind || !total) {
      return std::nullopt;
    }
    list.total = *total;
    list.rows.push_back(ParkedRow{.id = *id,
                                  .aggregate_type = std::string(*aggregate_type),
                                  .aggregate_id = std::string(*aggregate_id),
                                  .event_type = std::string(*event_type),
                                  .attempts = *attempts,
                                  .last_error = std::string(*last_error),
                                  .parked_at = std::string(*parked_at),
                                  .held_behind = *held_behind});
  }
  return list;
}

std::string parked_json(const ParkedList& list) {
  std::string out = "{\"total\":" + std::to_string(list.total) + ",\"limit\":" + std::to_string(list.limit) +
                    ",\"truncated\":" + (list.total > static_cast<std::int64_t>(list.rows.size()) ? "true" : "false") +
                    ",\"parked\":[";
  for (std::size_t i = 0; i < list.rows.size(); ++i) {
    const ParkedRow& row = list.rows[i];
    out += i == 0 ? "\n" : ",\n";
    out += "{\"id\":" + std::to_string(row.id) + ",\"aggregate_type\":";
    log::append_json_string(out, row.aggregate_type);
    out += ",\"aggregate_id\":";
    log::append_json_string(out, row.aggregate_id);
    out += ",\"event_type\":";
    log::append_json_string(out, row.event_type);
    out += ",\"attempts\":" + std::to_string(row.attempts) + ",\"parked_at\":";
    log::append_json_string(out, row.parked_at);
    out += ",\"held_behind\":" + std::to_string(row.held_behind) + ",\"last_error\":";
    log::append_json_string(out, row.last_error);
    out += "}";
  }
  out += list.rows.empty() ? "]}\n" : "\n]}\n";
  return out;
}

}  // namespace idem::relay
