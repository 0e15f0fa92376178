#include "store/pg/record_codec.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/stored_headers.hpp"
#include "pg/binary_row.hpp"
#include "store/pg/sql.hpp"

namespace idem::store::pg {

using idem::pg::BinaryRow;
using idem::pg::Param;
using idem::pg::Statement;
namespace oid = idem::pg::oid;

std::string_view state_column_value(core::RecordState state) {
  switch (state) {
    case core::RecordState::in_flight: return "in_flight";
    case core::RecordState::completed: return "completed";
    case core::RecordState::too_large: return "too_large";
    case core::RecordState::unknown: return "unknown";
  }
  return "invalid";
}

std::optional<core::RecordState> parse_state_column(std::string_view value) {
  for (const core::RecordState state : {core::RecordState::in_flight, core::RecordState::completed,
                                        core::RecordState::too_large, core::RecordState::unknown}) {
    if (value == state_column_value(state)) return state;
  }
  return std::nullopt;
}

Statement claim_statement(const ClaimRequest& request) {
  Statement statement{.name = "claim", .sql = sql::kClaim, .params = {}};
  statement.params.reserve(10);
  statement.params.push_back(Param::text(request.scope));
  statement.params.push_back(Param::text(request.key));
  statement.params.push_back(Param::text(request.fingerprint));
  statement.params.push_back(Param::text(request.owner));
  statement.params.push_back(Param::int8(request.ttl.count()));
  statement.params.push_back(Param::int8(request.lease.count()));
  statement.params.push_back(Param::boolean(request.take_over_lapsed_lease));
  statement.params.push_back(Param::int8(request.unsettled_retention.count()));
  statement.params.push_back(request.legacy_scope.empty() ? Param::null(oid::text) : Param::text(request.legacy_scope));
  statement.params.push_back(request.legacy_fingerprint.empty() ? Param::null(oid::text)
                                                                : Param::text(request.legacy_fingerprint));
  return statement;
}

Statement complete_statement(const CompleteRequest& request) {
  Statement statement{.name = "complete", .sql = sql::kComplete, .params = {}};
  statement.params.reserve(8);
  statement.params.push_back(Param::text(request.scope));
  statement.params.push_back(Param::text(request.key));
  statement.params.push_back(Param::text(request.owner));
  statement.params.push_back(Param::text(std::string(state_column_value(request.state))));
  statement.params.push_back(Param::int4(request.response.status));
  if (request.state == core::RecordState::completed) {
    statement.params.push_back(Param::bytea(core::encode_header_block(request.response.headers)));
    statement.params.push_back(Param::bytea(request.response.body));
  } else {  // too_large and unknown keep the status only
    statement.params.push_back(Param::null(oid::bytea));
    statement.params.push_back(Param::null(oid::bytea));
  }
  statement.params.push_back(Param::int8(request.ttl.count()));
  return statement;
}

Statement release_statement(const ReleaseRequest& request) {
  Statement statement{.name = "release", .sql = sql::kRelease, .params = {}};
  statement.params.reserve(4);
  statement.params.push_back(Param::text(request.scope));
  statement.params.push_back(Param::text(request.key));
  statement.params.push_back(Param::text(request.owner));
  statement.params.push_back(Param::int8(fence_lifetime(request).count()));
  return statement;
}

Statement mark_unknown_statement(const ReleaseRequest& request) {
  Statement statement{.name = "mark_unknown", .sql = sql::kMarkUnknown, .params = {}};
  statement.params.reserve(4);
  statement.params.push_back(Param::text(request.scope));
  statement.params.push_back(Param::text(request.key));
  statement.params.push_back(Param::text(request.owner));
  statement.params.push_back(Param::int8((request.ttl + request.unknown_retention).count()));
  return statement;
}

Statement force_release_statement(const RecordKey& key) {
  Statement statement{.name = "force_release", .sql = sql::kForceRelease, .params = {}};
  statement.params.reserve(2);
  statement.params.push_back(Param::text(key.scope));
  statement.params.push_back(Param::text(key.key));
  return statement;
}

Statement sweep_expired_statement(std::size_t batch) {
  Statement statement{.name = "sweep_expired", .sql = sql::kSweepExpired, .params = {}};
  // LIMIT takes an int8; a batch beyond it means "no limit" in any case.
  constexpr auto kMaxBatch = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  statement.params.push_back(Param::int8(static_cast<std::int64_t>(batch < kMaxBatch ? batch : kMaxBatch)));
  return statement;
}

Statement inspect_statement(const RecordKey& key) {
  Statement statement{.name = "inspect", .sql = sql::kInspect, .params = {}};
  statement.params.reserve(2);
  statement.params.push_back(Param::text(key.scope));
  statement.params.push_back(Param::text(key.key));
  return statement;
}

DecodedClaim decode_claim_row(const PGresult* result, int row) {
  if (PQnfields(result) != sql::claim_column_count) return {std::nullopt, "claim returned an unexpected column count"};
  const BinaryRow columns(result, row);
  const auto claimed = columns.boolean(sql::claim_col_claimed);
  if (!claimed) return {std::nullopt, "claim: bad `claimed` column"};
  const auto expires_in = columns.int8(sql::claim_col_expires_in);
  if (!expires_in) return {std::nullopt, "claim: bad expires_in column"};
  core::ClaimResult claim;
  claim.claimed = *claimed;
  core::Record& record = claim.existing;
  record.expires_in = std::chrono::milliseconds(*expires_in);
  if (claim.claimed) return {std::move(claim), {}};
  const auto legacy = columns.boolean(sql::claim_col_legacy);
  if (!legacy) return {std::nullopt, "claim: bad legacy column"};
  claim.existing_under_legacy_scope = *legacy;

  const auto fingerprint = columns.text(sql::claim_col_fingerprint);
  const auto state_text = columns.text(sql::claim_col_state);
  const auto state = state_text ? parse_state_column(*state_text) : std::nullopt;
  if (!fingerprint || !state) return {std::nullopt, "claim: bad fingerprint or state column"};
  record.fingerprint = std::string(*fingerprint);
  record.state = *state;

  if (!columns.is_null(sql::claim_col_response_status)) {
    const auto status = columns.int4(sql::claim_col_response_status);
    if (!status) return {std::nullopt, "claim: bad response_status column"};
    record.response.status = *status;
  }
  if (!columns.is_null(sql::claim_col_response_headers)) {
    const auto block = columns.bytea(sql::claim_col_response_headers);
    auto headers = block ? core::decode_header_block(*block) : std::nullopt;
    if (!headers) return {std::nullopt, "claim: bad response_headers column"};
    record.response.headers = std::move(*headers);
  }
  if (!columns.is_null(sql::claim_col_response_body)) {
    const auto body = columns.bytea(sql::claim_col_response_body);
    if (!body) return {std::nullopt, "claim: bad response_body column"};
    record.response.body = std::string(*body);
  }
  if (!columns.is_null(sql::claim_col_lease_remaining)) {
    const auto lease = columns.int8(sql::claim_col_lease_remaining);
    if (!lease) return {std::nullopt, "claim: bad lease_remaining column"};
    record.lease_remaining = std::chrono::milliseconds(*lease);
  }
  return {std::move(claim), {}};
}

DecodedInspect decode_inspect_row(const PGresult* result, int row) {
  if (PQnfields(result) != sql::inspect_column_count) {
    return {std::nullopt, "inspect returned an unexpected column count"};
  }
  const BinaryRow columns(result, row);
  RecordInfo info;
  const auto fingerprint = columns.text(sql::inspect_col_fingerprint);
  const auto state_text = columns.text(sql::inspect_col_state);
  const auto state = state_text ? parse_state_column(*state_text) : std::nullopt;
  if (!fingerprint || !state) return {std::nullopt, "inspect: bad fingerprint or state column"};
  info.fingerprint = std::string(*fingerprint);
  info.state = *state;

  // NOT NULL columns must decode; nullable ones read as 0 when NULL.
  const auto created_at = columns.int8(sql::inspect_col_created_at);
  const auto expires_at = columns.int8(sql::inspect_col_expires_at);
  if (!created_at || !expires_at) return {std::nullopt, "inspect: bad created_at or expires_at column"};
  info.created_at_ms = *created_at;
  info.expires_at_ms = *expires_at;
  const auto nullable_int8 = [&columns](int column, std::int64_t& out) {
    if (columns.is_null(column)) return true;
    const auto value = columns.int8(column);
    if (value) out = *value;
    return value.has_value();
  };
  std::int64_t body_bytes = 0;
  if (!nullable_int8(sql::inspect_col_lease_expires_at, info.lease_expires_at_ms) ||
      !nullable_int8(sql::inspect_col_completed_at, info.completed_at_ms) ||
      !nullable_int8(sql::inspect_col_body_bytes, body_bytes) || body_bytes < 0) {
    return {std::nullopt, "inspect: bad lease_expires_at, completed_at or body_bytes column"};
  }
  info.body_bytes = static_cast<std::size_t>(body_bytes);
  if (!columns.is_null(sql::inspect_col_response_status)) {
    const auto status = columns.int4(sql::inspect_col_response_status);
    if (!status) return {std::nullopt, "inspect: bad response_status column"};
    info.response_status = *status;
  }
  return {std::move(info), {}};
}

std::optional<bool> decode_release_row(const PGresult* result, int row) {
  if (PQnfields(result) != sql::release_column_count) return std::nullopt;
  return BinaryRow(result, row).boolean(sql::release_col_released);
}

DecodedForceRelease decode_force_release_row(const PGresult* result, int row) {
  if (PQnfields(result) != sql::force_release_column_count) {
    return {std::nullopt, "force_release returned an unexpected column count"};
  }
  const BinaryRow columns(result, row);
  const auto released = columns.boolean(sql::force_release_col_released);
  if (!released) return {std::nullopt, "force_release: bad `released` column"};
  ForceReleaseOutcome outcome;
  outcome.released = *released;
  if (!columns.is_null(sql::force_release_col_lease_remaining)) {
    const auto lease = columns.int8(sql::force_release_col_lease_remaining);
    if (!lease) return {std::nullopt, "force_release: bad lease_remaining column"};
    outcome.lease_remaining = std::chrono::milliseconds(*lease);
  }
  return {outcome, {}};
}

}  // namespace idem::store::pg
