#pragma once
// Records to and from the columns of idempotency_records, as the statements in sql.hpp use them.
#include <libpq-fe.h>

#include <optional>
#include <string>
#include <string_view>

#include "core/decision.hpp"
#include "core/record.hpp"
#include "store/pg/statement.hpp"
#include "store/store.hpp"

namespace idem::store::pg {

// The values of the `state` column (its CHECK constraint lists the same four).
std::string_view state_column_value(core::RecordState state);
std::optional<core::RecordState> parse_state_column(std::string_view value);

Statement claim_statement(const ClaimRequest& request);
Statement complete_statement(const CompleteRequest& request);  // request.state must not be in_flight
Statement release_statement(const ReleaseRequest& request);

struct DecodedClaim {
  std::optional<core::ClaimResult> claim;  // set on success
  std::string error;                       // otherwise: what did not decode
};
// Decodes one row of sql::kClaim's result (binary format).
DecodedClaim decode_claim_row(const PGresult* result, int row);

}  // namespace idem::store::pg
