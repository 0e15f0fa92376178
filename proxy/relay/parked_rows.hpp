#pragma once
// What is parked, and why: the dead-lettered outbox rows with their last error and how many rows
// of their aggregate wait behind each. One statement and one decoder, shared by the command line
// (`idemrelay --list-parked`, blocking libpq) and the admin listener (`GET /admin/parked`, the
// async pool), so both answer with the same JSON document. No I/O here.
#include <libpq-fe.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pg/statement.hpp"

namespace idem::relay {

// An aggregate as the operator names it: "TYPE/ID", split at the first '/' (an aggregate type
// has no '/'; its id may).
struct AggregateRef {
  std::string type;
  std::string id;
};
std::optional<AggregateRef> parse_aggregate(std::string_view text);

inline constexpr std::size_t kDefaultParkedLimit = 100;
inline constexpr std::size_t kMaxParkedLimit = 1000;

struct ParkedQuery {
  std::size_t limit = kDefaultParkedLimit;  // 1..kMaxParkedLimit
  std::optional<AggregateRef> aggregate;    // that aggregate's parked rows only
};
// The limit as given ("--limit N", "?limit=N"): nullopt unless 1..kMaxParkedLimit.
std::optional<std::size_t> parse_parked_limit(std::string_view text);

struct ParkedRow {
  std::int64_t id = 0;
  std::string aggregate_type;
  std::string aggregate_id;
  std::string event_type;
  std::int32_t attempts = 0;
  std::string last_error;
  std::string parked_at;         // RFC 3339, UTC
  std::int64_t held_behind = 0;  // unpublished rows of the aggregate after this one, waiting for it
};

struct ParkedList {
  std::vector<ParkedRow> rows;  // oldest first, at most `limit`
  std::int64_t total = 0;       // parked rows matching the query, listed or not
  std::size_t limit = 0;
};

pg::Statement parked_statement(const ParkedQuery& query);
// nullopt when the result does not have the statement's shape.
std::optional<ParkedList> decode_parked(const PGresult* result, std::size_t limit);
// {"total":N,"limit":L,"truncated":bool,"parked":[{...}, ...]}, one row per line.
std::string parked_json(const ParkedList& list);

}  // namespace idem::relay

namespace idem::relay {

// The query string of GET /admin/parked ("aggregate=T%2FID&limit=N", both optional, in any
// order): the query, or a message saying what is wrong with it.
struct ParkedTarget {
  std::optional<ParkedQuery> query;
  std::string error;
};
ParkedTarget parse_parked_query_string(std::string_view query_string);

}  // namespace idem::relay
