#include "store/pg/record_codec.hpp"

#include <chrono>
#include <utility>

#include "core/stored_headers.hpp"
#include "store/pg/binary_row.hpp"
#include "store/pg/sql.hpp"

namespace idem::store::pg {

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
  statement.params.reserve(7);
  statement.params.push_back(Param::text(request.scope));
  statement.params.push_back(Param::text(request.key));
  statement.params.push_back(Param::text(request.fingerprint));
  statement.params.push_back(Param::text(request.owner));
  statement.params.push_back(Param::int8(request.ttl.count()));
  statement.params.push_back(Param::int8(request.lease.count()));
  statement.params.push_back(Param::boolean(request.take_over_lapsed_lease));
  return statement;
}

Statement complete_statement(const CompleteRequest& request) {
  Statement statement{.name = "complete", .sql = sql::kComplete, .params = {}};
  statement.params.reserve(7);
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
  return statement;
}

Statement release_statement(const ReleaseRequest& request) {
  Statement statement{.name = "release", .sql = sql::kRelease, .params = {}};
  statement.params.reserve(3);
  statement.params.push_back(Param::text(request.scope));
  statement.params.push_back(Param::text(request.key));
  statement.params.push_back(Param::text(request.owner));
  return statement;
}

DecodedClaim decode_claim_row(const PGresult* result, int row) {
  if (PQnfields(result) != sql::claim_column_count) return {std::nullopt, "claim returned an unexpected column count"};
  const BinaryRow columns(result, row);
  const auto claimed = columns.boolean(sql::claim_col_claimed);
  if (!claimed) return {std::nullopt, "claim: bad `claimed` column"};
  core::ClaimResult claim;
  claim.claimed = *claimed;
  if (claim.claimed) return {std::move(claim), {}};

  core::Record& record = claim.existing;
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

}  // namespace idem::store::pg
